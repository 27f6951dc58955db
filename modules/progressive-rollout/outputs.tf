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
  description = "Per picked cluster, the revision it runs."
  value       = { for name, s in gradual_rollout.this.cluster_states : name => s.revision }
}

output "cluster_states" {
  description = "Per picked cluster: `revision`, `state` (`current`, `drifted`, `provisioning`, `restored`, `pending`) and `backup` revision."
  value       = gradual_rollout.this.cluster_states
}

output "waves" {
  description = "The planned waves, in order: the canaries first, then the percentage waves."
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
