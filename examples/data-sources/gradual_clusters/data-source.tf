# Every production cluster in the "fleet" namespace.
data "gradual_clusters" "prod" {
  namespace = "fleet"
  selector = {
    match_labels = { env = "prod" }
    match_expressions = [
      { key = "region", operator = "In", values = ["eu", "us"] },
    ]
  }
}

# Fail the plan early when a production cluster cannot be rolled out to.
check "prod_clusters_ready" {
  assert {
    condition = alltrue([for c in data.gradual_clusters.prod.clusters : c.eligible])
    error_message = join("\n", [
      for c in data.gradual_clusters.prod.clusters : "${c.name}: ${c.skip_reason}" if !c.eligible
    ])
  }
}

output "eligible_prod_clusters" {
  value = data.gradual_clusters.prod.eligible_names
}

# Or pick clusters by name.
data "gradual_clusters" "canaries" {
  namespace = "fleet"
  names     = ["prod-eu-1"]
}
