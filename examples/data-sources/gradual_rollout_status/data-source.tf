# Every cluster of a rollout, one by one, read after the rollout's apply.
data "gradual_rollout_status" "ingress" {
  namespace  = gradual_rollout.ingress.namespace
  name       = gradual_rollout.ingress.name
  depends_on = [gradual_rollout.ingress]
}

output "ingress_revisions" {
  value = { for c in data.gradual_rollout_status.ingress.clusters : c.name => c.revision }
}

# Fail the run (as a check, after apply) when a cluster drifted.
check "ingress_not_drifted" {
  assert {
    condition     = alltrue([for c in data.gradual_rollout_status.ingress.clusters : c.state != "drifted"])
    error_message = "drifted: ${join("; ", [for c in data.gradual_rollout_status.ingress.clusters : "${c.name}: ${c.detail}" if c.state == "drifted"])}"
  }
}
