# A bundle of modules (add-ons) on every Cluster API cluster a label selector picks, including
# clusters that match later: the replacement for a ClusterResourceSet, with deletion on leave,
# drift repair (Reconcile) and verified waves.
resource "gradual_module_assignment" "this" {
  name      = var.name
  namespace = var.namespace

  selector = {
    match_labels      = length(var.selector_labels) > 0 ? var.selector_labels : null
    match_expressions = length(var.selector_expressions) > 0 ? var.selector_expressions : null
  }

  modules = [
    for m in var.modules : {
      name       = m.name
      version    = m.version
      manifests  = m.manifests
      depends_on = length(m.depends_on) > 0 ? m.depends_on : null
    }
  ]

  mode             = var.mode
  update_limit     = var.update_limit
  max_failures     = var.max_failures
  deletion_policy  = var.deletion_policy
  record_namespace = var.record_namespace

  verify = {
    timeout   = var.verify_timeout
    bake_time = var.bake_time
  }

  timeouts = var.timeouts
}
