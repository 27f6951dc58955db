# Promotion by stages: eu first, then us; this apply stops after eu.
resource "gradual_rollout" "web" {
  name         = "web"
  namespace    = "fleet"
  selector     = { match_labels = { app = "web" } }
  manifests    = file("${path.module}/web.yaml")
  canary       = ["staging-eu-1"]
  update_limit = "10%"
  max_failures = "2"

  stages = [
    # A stage picks clusters by name or by labels; a cluster belongs to the first stage that
    # picks it. Limits left out are the rollout's.
    { name = "eu", match_labels = { region = "eu" }, update_limit = "25%", max_failures = "0", bake_time = "10m" },
    { name = "us", match_labels = { region = "us" } },
    { name = "ap", names = ["prod-ap-1", "prod-ap-2"] },
  ]
  # The reviewed one-line promotion: "eu", then "us", then "ap" (or leave it out: every stage).
  promote_until = "eu"
}
