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

# What the next revision would do on each cluster, dry-run at plan time (no depends_on, so
# it is read before the rollout changes anything): a reviewer sees per cluster what the
# rollout's plan warning only totals, and a check names every cluster that would conflict.
data "gradual_rollout_status" "ingress_next" {
  namespace         = "fleet"
  name              = "ingress"
  preview_manifests = file("${path.module}/ingress.yaml")
}

output "ingress_next_changes" {
  value = { for c in data.gradual_rollout_status.ingress_next.clusters : c.name => c.preview if c.preview != null }
}

check "ingress_next_applies_cleanly" {
  assert {
    condition     = alltrue([for c in data.gradual_rollout_status.ingress_next.clusters : c.preview == null || c.preview.conflicting == 0])
    error_message = "conflicts: ${join("; ", flatten([for c in data.gradual_rollout_status.ingress_next.clusters : [for x in c.preview.conflicts : "${c.name}: ${x}"] if c.preview != null]))}"
  }
}
