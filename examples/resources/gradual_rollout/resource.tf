# Roll ingress.yaml out to every production cluster: the canary first, then a quarter of the
# fleet at a time, each wave verified (every object ready) and baked before the next.
resource "gradual_rollout" "ingress" {
  name      = "ingress"
  namespace = "fleet"
  selector = {
    match_labels = { env = "prod" }
  }
  manifests = file("${path.module}/ingress.yaml")

  canary       = ["prod-eu-1"]
  update_limit = "25%"
  max_failures = "0"
  on_failure   = "rollback" # restore every cluster this apply changed when a wave fails

  # The HPA owns the controller's replicas, cert-manager the webhook's CA bundle: apply leaves
  # them to their owners and drift detection does not count them.
  ignore_fields = [
    { kind = "Deployment", name = "ingress-controller", paths = [".spec.replicas"] },
    { kind = "ValidatingWebhookConfiguration", paths = [".webhooks[*].clientConfig.caBundle"] },
  ]

  # Change clusters only on Saturday nights, Berlin time: a cluster starts only while the window
  # is open for at least verify.timeout + bake_time more; the others wait, and the plan says
  # until when. A Cluster annotated gradual.dev/maintenance-window = "<cron>;<duration>;<zone>"
  # must be inside its own window as well; one annotated gradual.dev/paused = "<reason>" waits.
  maintenance_window = {
    schedule  = "0 1 * * 6"
    duration  = "4h"
    time_zone = "Europe/Berlin"
  }

  verify = {
    timeout   = "5m"
    bake_time = "30s"
    http_checks = [
      { url = "https://{cluster}.example.com/healthz", expected_status = 200 },
    ]
  }

  timeouts = {
    create = "60m"
    update = "60m"
    delete = "30m"
  }
}

# How many clusters are in each state, the ones that need attention, and the revisions that
# failed (refused by later plans). Per-cluster detail: the gradual_rollout_status data source.
output "ingress_summary" {
  value = gradual_rollout.ingress.summary
}

output "ingress_attention" {
  value = gradual_rollout.ingress.attention
}

output "ingress_invalid_revisions" {
  value = gradual_rollout.ingress.invalid_revisions
}
