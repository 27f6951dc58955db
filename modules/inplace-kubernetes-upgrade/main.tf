# The Kubernetes version of a MachineDeployment's Machines, changed in place through Cluster API
# runtime update extensions (CanUpdateMachine / UpdateMachine), at most `update_limit` machines at
# a time, each verified by its Node (Ready, reporting the new kubelet version). Machines no
# extension can update in place fail the plan (`fallback = "none"`) or are replaced the CAPI way
# (`fallback = "rolling"`).
resource "gradual_inplace_update" "this" {
  namespace          = var.namespace
  cluster            = var.cluster
  machine_deployment = var.machine_deployment
  version            = var.kubernetes_version

  machine_spec_patch                = var.machine_spec_patch == null ? null : jsonencode(var.machine_spec_patch)
  bootstrap_config_spec_patch       = var.bootstrap_config_spec_patch == null ? null : jsonencode(var.bootstrap_config_spec_patch)
  infrastructure_machine_spec_patch = var.infrastructure_machine_spec_patch == null ? null : jsonencode(var.infrastructure_machine_spec_patch)

  # Empty: the extensions registered in the management cluster as ExtensionConfig objects.
  extensions = length(var.extensions) > 0 ? var.extensions : null

  update_limit = var.update_limit
  fallback     = var.fallback
  verify       = { timeout = var.verify_timeout }

  timeouts = var.timeouts
}
