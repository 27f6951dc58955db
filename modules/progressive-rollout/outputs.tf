output "id" {
  description = "`namespace/name` of the rollout."
  value       = gradual_rollout.this.id
}

output "revision" {
  description = "The revision (content hash) of `manifests`, known at plan time."
  value       = gradual_rollout.this.revision
}

output "backup_revision" {
  description = "The revision clusters return to if this one fails (empty on first install)."
  value       = gradual_rollout.this.backup_revision
}

output "cluster_revisions" {
  description = "Per picked cluster (skipped ones left out), the revision it runs."
  value       = { for c in data.gradual_rollout_status.this.clusters : c.name => c.revision if c.state != "skipped" }
}

output "clusters" {
  description = "Every picked cluster: `name`, `state` (`current`, `outdated`, `drifted`, `provisioning`, `pending`, `skipped`), `revision`, `backup`, `detail`, `drift`, `skip_reason` (the `gradual_rollout_status` data source)."
  value       = data.gradual_rollout_status.this.clusters
}

output "summary" {
  description = "How many picked clusters are in each state, e.g. `{ current = 40, skipped = 1 }`."
  value       = gradual_rollout.this.summary
}

output "attention" {
  description = "The picked clusters that are not current, each with what is wrong (drifted objects and fields, the revision it runs instead)."
  value       = gradual_rollout.this.attention
}

output "waves" {
  description = "The planned waves in one line, as counts in order: the canaries first, then the percentage waves."
  value       = gradual_rollout.this.waves
}

output "skipped" {
  description = "Picked clusters this apply left alone, with the reason. A later apply picks them up once they are ready."
  value       = gradual_rollout.this.skipped
}

output "invalid_revisions" {
  description = "Revisions recorded invalid in the management cluster's ledger: `revision`, `clusters`, `reason`, `recorded_at`. A later plan refuses them."
  value       = gradual_rollout.this.invalid_revisions
}
