# Upgrade the workers of prod-eu-1 to v1.36.3 in place: the change is written to MachineDeployment
# md-0 (template version; the bootstrap template is rotated — copied with the patch under a new
# name — never edited) and Cluster API updates the machines through the bare-metal update
# extension. The plan previews each machine (in place by which extension, or replaced); it fails
# if any would be replaced. In-place updates need the MachineDeployment rolled out with
# maxSurge 0 and maxUnavailable >= 1, and Cluster API's InPlaceUpdates feature gate.
resource "gradual_inplace_update" "workers" {
  namespace          = "fleet"
  cluster            = "prod-eu-1"
  machine_deployment = "md-0"
  version            = "v1.36.3"
  # Write-only (Terraform/OpenTofu 1.11+): never in plan or state; its digest shows a change.
  bootstrap_config_spec_patch = jsonencode({
    ntp = { servers = ["time.example.com"] }
  })

  extensions = [{
    name      = "bare-metal-updater"
    url       = "https://updater.example.com:9443"
    ca_bundle = file("updater-ca.pem")
  }]

  fallback = "none" # or "rolling": let CAPI replace what no extension can update in place
  verify   = { timeout = "10m" }
  timeouts = { create = "2h", update = "2h" }
}

# The control plane of prod-eu-1: KubeadmControlPlane prod-eu-1-cp gets the version and
# updates its machines; the extensions come from the management cluster's ExtensionConfig
# objects (one with a `service` is called through the management API server's service proxy).
# Cluster API calls one extension per in-place hook: register one. KubeadmControlPlane updates
# its machines in place when it rolls out with maxSurge 0 (which needs 3 replicas or more);
# with its default maxSurge 1 it replaces them.
resource "gradual_inplace_update" "control_plane" {
  namespace     = "fleet"
  cluster       = "prod-eu-1"
  control_plane = "prod-eu-1-cp"
  version       = "v1.36.3"
}

# The fleet form: the workers of every prod cluster, two clusters at a time, prod-eu-1 first.
# Each cluster's control plane is updated and verified before its MachineDeployments (picked by
# label: their names differ from cluster to cluster). The plan shows the waves in one line, a
# summary and the clusters to look at (skipped, machines Cluster API would replace); the first
# cluster that is not up to date within verify.timeout stops the update (max_failures "0"),
# nothing is rolled back. Per-machine detail: the gradual_inplace_update_plan data source.
resource "gradual_inplace_update" "prod" {
  namespace                   = "fleet"
  selector                    = { match_labels = { env = "prod" } }
  update_control_plane        = true
  machine_deployment_selector = { match_labels = { pool = "workers" } }
  version                     = "v1.36.3"

  canary       = ["prod-eu-1"]
  update_limit = "2"
  max_failures = "0"
  fallback     = "none"
  verify       = { timeout = "15m" }
}

# Clusters built from a ClusterClass (spec.topology), two at a time with a canary: the version is
# written to each Cluster's spec.topology.version, never to the KubeadmControlPlane or the
# MachineDeployments the topology controller manages. The topology controller upgrades the
# control plane, then every MachineDeployment it manages; Cluster API updates each machine in
# place where the update extension covers it. The plan previews every machine in that order;
# template changes go through the ClusterClass, and a version its spec.kubernetesVersions does
# not list is refused at plan.
resource "gradual_inplace_update" "class_built" {
  namespace            = "fleet"
  selector             = { match_labels = { class = "standard" } }
  update_control_plane = true
  version              = "v1.36.3"

  canary       = ["edge-1"]
  update_limit = "2"
  fallback     = "rolling"
  verify       = { timeout = "30m" }
}

# Named variables of the same clusters' topology, e.g. those the ClusterClass's patches read
# into the templates: written by name to each Cluster's spec.topology.variables, JSON-encoded,
# in the same write as the version (here none: the variables alone), the Cluster's other
# variables left as they are. A name the ClusterClass does not define, and a value Cluster API's
# Cluster webhook refuses against the variable's schema, fail the plan with nothing written.
# The plan lists each change (from → to) with its clusters; it cannot run the ClusterClass's
# patches, so it warns that Cluster API may update in place or replace machines it shows
# unchanged. Apply waits for TopologyReconciled and every machine up to date.
resource "gradual_inplace_update" "class_variables" {
  namespace            = "fleet"
  selector             = { match_labels = { class = "standard" } }
  update_control_plane = true
  topology_variables = {
    ntpServers = jsonencode(["time.example.com"])
    region     = jsonencode("eu-west")
  }

  canary   = ["edge-1"]
  fallback = "rolling"
  verify   = { timeout = "30m" }
}
