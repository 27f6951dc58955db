# The Kubernetes version of a MachineDeployment, written to its template; Cluster API updates the
# Machines, in place where its runtime update extensions cover the change (CanUpdateMachine /
# UpdateMachine). The plan previews each machine; machines no extension can update in place fail
# the plan (`fallback = "none"`) or are replaced by Cluster API (`fallback = "rolling"`). Apply
# waits until every machine is up to date and its Node Ready on the new kubelet version.
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

  # var.update_limit is not passed on: Cluster API paces the machines (maxUnavailable).
  fallback = var.fallback
  verify   = { timeout = var.verify_timeout }

  timeouts = var.timeouts
}
