# The Kubernetes version of a MachineDeployment (one-cluster form), or of the MachineDeployments
# and control planes of many clusters (fleet form), written to their templates; Cluster API updates
# the Machines, in place where its runtime update extensions cover the change (CanUpdateMachine /
# UpdateMachine). The plan previews each machine (one cluster) or the waves, counts and clusters to
# look at (fleet); machines no extension can update in place fail the plan (`fallback = "none"`)
# or are replaced by Cluster API (`fallback = "rolling"`). Apply waits until every machine is up to
# date and its Node Ready on the new kubelet version, cluster after cluster in the fleet form.
resource "gradual_inplace_update" "this" {
  namespace = var.namespace

  # One cluster: its MachineDeployment by name.
  cluster            = var.cluster
  machine_deployment = var.machine_deployment

  # A fleet: the clusters by name or label, the owners in each by label and/or the control plane.
  names = var.names != null ? var.names : var.clusters # `clusters`: the former name of `names`
  selector = length(var.selector_labels) + length(var.selector_expressions) == 0 ? null : {
    match_labels      = length(var.selector_labels) > 0 ? var.selector_labels : null
    match_expressions = length(var.selector_expressions) > 0 ? var.selector_expressions : null
  }
  machine_deployment_selector = var.machine_deployment_selector
  update_control_plane        = var.update_control_plane ? true : null
  canary                      = length(var.canary) > 0 ? var.canary : null

  version = var.kubernetes_version
  # ClusterClass-built clusters: each variable by name, JSON-encoded as the resource takes it.
  topology_variables = var.topology_variables == null ? null : { for k, v in var.topology_variables : k => jsonencode(v) }

  # bootstrap_config_spec_patch is write-only in the provider, ephemeral here: never in the plan or
  # the state. An empty patch ({}) is none.
  machine_spec_patch                = var.machine_spec_patch == null ? null : jsonencode(var.machine_spec_patch)
  bootstrap_config_spec_patch       = contains(["null", "{}"], jsonencode(var.bootstrap_config_spec_patch)) ? null : jsonencode(var.bootstrap_config_spec_patch)
  infrastructure_machine_spec_patch = var.infrastructure_machine_spec_patch == null ? null : jsonencode(var.infrastructure_machine_spec_patch)

  # Empty: the extensions registered in the management cluster as ExtensionConfig objects.
  extensions = length(var.extensions) > 0 ? var.extensions : null

  # Clusters at once and the failure budget of the fleet's waves; one cluster is one wave.
  update_limit = var.update_limit
  max_failures = var.max_failures
  fallback     = var.fallback
  verify       = { timeout = var.verify_timeout }

  timeouts = var.timeouts
}

locals {
  # Per-machine plan of the one-cluster form; null in the fleet form, whose per-machine detail is
  # the gradual_inplace_update_plan data source (a fleet's plan shows counts).
  machine_plan = gradual_inplace_update.this.plan == null ? [] : gradual_inplace_update.this.plan
}
