# A progressive rollout of one bundle of manifests: the canary clusters first, each in a wave of
# its own, then waves of `wave_size` of the eligible clusters; every wave is verified (every
# applied object ready), baked for `bake_time` and verified again before the next one starts.
# A cluster that fails is restored to its backup revision and the revision is recorded invalid.
resource "gradual_rollout" "this" {
  name      = var.name
  namespace = var.namespace

  selector = local.names != null || (length(var.selector_labels) == 0 && length(var.selector_expressions) == 0) ? null : {
    match_labels      = length(var.selector_labels) > 0 ? var.selector_labels : null
    match_expressions = length(var.selector_expressions) > 0 ? var.selector_expressions : null
  }
  # An empty list stays empty, and the provider refuses it: it must not mean "every Cluster".
  names = local.names

  manifests           = var.manifests
  sensitive_manifests = var.sensitive_manifests == "" ? null : var.sensitive_manifests # write-only; "" is none
  sensitive_paths     = var.sensitive_paths
  values              = var.values

  canary          = length(var.canary) > 0 ? var.canary : null
  canary_optional = var.canary_optional
  update_limit    = var.wave_size
  max_failures    = var.max_failures
  on_failure      = var.on_failure
  stages          = var.stages
  promote_until   = var.promote_until
  preview         = var.preview
  max_unsettled   = var.max_unsettled

  verify = {
    timeout       = var.verify_timeout
    bake_time     = var.bake_time
    http_checks   = length(var.http_checks) > 0 ? var.http_checks : null
    health_checks = length(var.health_checks) > 0 ? var.health_checks : null
    cluster_gates = var.cluster_gates
    check_job     = var.check_job
  }

  retry_invalid     = var.retry_invalid
  force_conflicts   = var.force_conflicts
  adopt             = var.adopt
  ignore_fields     = var.ignore_fields
  default_namespace = var.default_namespace
  deletion_policy   = var.deletion_policy
  record_namespace  = var.record_namespace

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
      condition     = var.delivery != null || alltrue([for s in [var.registry_password, var.registry_token, var.registry_client_key] : s == null || s == ""])
      error_message = "registry_password, registry_token and registry_client_key are for delivery through Flux: set delivery, or leave them out."
    }
  }
}

# Per-cluster detail, read after the rollout's apply: the rollout itself shows counts and the
# clusters needing attention, so that its plan stays readable at any fleet size.
data "gradual_rollout_status" "this" {
  namespace        = gradual_rollout.this.namespace
  name             = gradual_rollout.this.name
  record_namespace = gradual_rollout.this.record_namespace

  depends_on = [gradual_rollout.this]
}

locals {
  # `clusters` is the former name of `names`.
  names = var.names != null ? var.names : var.clusters
}
