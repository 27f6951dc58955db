# Upgrade the workers of prod-eu-1 to v1.36.3 in place, one machine at a time, through the
# bare-metal update extension; fail the plan if it cannot update every machine in place.
resource "gradual_inplace_update" "workers" {
  namespace          = "fleet"
  cluster            = "prod-eu-1"
  machine_deployment = "md-0"
  version            = "v1.36.3"
  bootstrap_config_spec_patch = jsonencode({
    ntp = { servers = ["time.example.com"] }
  })

  extensions = [{
    name      = "bare-metal-updater"
    url       = "https://updater.example.com:9443"
    ca_bundle = file("updater-ca.pem")
  }]

  update_limit = 1
  fallback     = "none" # or "rolling": let CAPI replace what no extension can update in place
  verify       = { timeout = "10m" }
  timeouts     = { create = "2h", update = "2h" }
}

# Without `extensions`, the ExtensionConfig objects of the management cluster are used.
resource "gradual_inplace_update" "edge" {
  namespace = "fleet"
  cluster   = "edge-7"
  selector  = { "node-pool" = "gpu" }
  version   = "v1.36.3"
  fallback  = "rolling"
}

# The control plane Machines of prod-eu-1 (those of KubeadmControlPlane prod-eu-1-cp), one at
# a time; the extensions come from the management cluster's ExtensionConfig objects.
resource "gradual_inplace_update" "control_plane" {
  namespace     = "fleet"
  cluster       = "prod-eu-1"
  control_plane = "prod-eu-1-cp"
  version       = "v1.36.3"
  update_limit  = 1
}
