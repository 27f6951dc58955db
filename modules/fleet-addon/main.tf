# A bundle of modules (add-ons) on every Cluster API cluster a label selector picks, including
# clusters that match later: the replacement for a ClusterResourceSet, with deletion on leave,
# drift repair (Reconcile) and verified waves.
resource "gradual_module_assignment" "this" {
  name      = var.name
  namespace = var.namespace

  selector = local.names != null ? null : {
    match_labels      = length(var.selector_labels) > 0 ? var.selector_labels : null
    match_expressions = length(var.selector_expressions) > 0 ? var.selector_expressions : null
  }
  # An empty list stays empty, and the provider refuses it: it must not mean "every Cluster".
  names = local.names

  modules = [
    for m in var.modules : {
      name              = m.name
      version           = m.version
      manifests         = m.manifests
      depends_on        = length(m.depends_on) > 0 ? m.depends_on : null
      default_namespace = m.default_namespace
      # Write-only in the provider: never in the plan or the state. The ephemeral input, or the
      # module's own (which cannot be ephemeral).
      sensitive_manifests = lookup(var.sensitive_manifests, m.name, m.sensitive_manifests)
    }
  ]

  mode             = var.mode
  update_limit     = var.update_limit
  max_failures     = var.max_failures
  deletion_policy  = var.deletion_policy
  record_namespace = var.record_namespace

  canary             = length(var.canary) > 0 ? var.canary : null
  canary_optional    = var.canary_optional
  on_failure         = var.on_failure
  retry_invalid      = var.retry_invalid
  force_conflicts    = var.force_conflicts
  adopt              = var.adopt
  ignore_fields      = var.ignore_fields
  sensitive_paths    = var.sensitive_paths
  maintenance_window = var.maintenance_window
  values             = var.values
  preview            = var.preview
  max_unsettled      = var.max_unsettled

  verify = {
    timeout       = var.verify_timeout
    bake_time     = var.bake_time
    health_checks = length(var.health_checks) > 0 ? var.health_checks : null
    cluster_gates = var.cluster_gates
    check_job     = var.check_job
  }

  delivery = var.delivery == null ? null : {
    flux = {
      repository         = var.delivery.flux.repository
      insecure           = var.delivery.flux.insecure
      ca_bundle          = var.delivery.flux.ca_bundle
      secret_ref         = var.delivery.flux.secret_ref
      cert_secret_ref    = var.delivery.flux.cert_secret_ref
      username           = var.delivery.flux.username
      client_certificate = var.delivery.flux.client_certificate
      # Write-only in the provider, ephemeral here: never in the plan or the state. "" is none.
      password   = var.registry_password == "" ? null : var.registry_password
      token      = var.registry_token == "" ? null : var.registry_token
      client_key = var.registry_client_key == "" ? null : var.registry_client_key
    }
  }

  timeouts = var.timeouts

  lifecycle {
    precondition {
      condition     = var.names == null || var.clusters == null
      error_message = "Set names or its former name clusters, not both."
    }
    precondition {
      condition     = alltrue([for k in keys(var.sensitive_manifests) : contains([for m in var.modules : m.name], k)])
      error_message = "sensitive_manifests names a module that is not in modules."
    }
    precondition {
      condition     = alltrue([for m in var.modules : m.sensitive_manifests == null || !contains(keys(var.sensitive_manifests), m.name)])
      error_message = "A module's sensitive_manifests is set both in modules and in the sensitive_manifests input: set it in one of the two."
    }
    precondition {
      condition     = var.delivery != null || alltrue([for s in [var.registry_password, var.registry_token, var.registry_client_key] : s == null || s == ""])
      error_message = "registry_password, registry_token and registry_client_key are for delivery through Flux: set delivery, or leave them out."
    }
  }
}

# Every cluster's bindings, read after the assignment applies: the assignment itself shows counts
# and the clusters needing attention, so that its plan stays small at any fleet size.
data "gradual_module_assignment_status" "this" {
  namespace        = gradual_module_assignment.this.namespace
  name             = gradual_module_assignment.this.name
  record_namespace = gradual_module_assignment.this.record_namespace
  depends_on       = [gradual_module_assignment.this]
}

locals {
  bindings = {
    for c in data.gradual_module_assignment_status.this.clusters : c.name => [
      for b in c.bindings : { module = b.module, revision = b.revision, applied_at = b.applied_at, result = b.result } if b.result != ""
    ] if anytrue([for b in c.bindings : b.result != ""])
  }
}

locals {
  # `clusters` is the former name of `names`.
  names = var.names != null ? var.names : var.clusters
}
