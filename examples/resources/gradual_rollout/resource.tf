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

# What each cluster runs, and the revisions that failed (refused by later plans).
output "ingress_clusters" {
  value = gradual_rollout.ingress.cluster_states
}

output "ingress_invalid_revisions" {
  value = gradual_rollout.ingress.invalid_revisions
}
