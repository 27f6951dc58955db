output "id" {
  description = "`namespace/name` of the assignment."
  value       = gradual_module_assignment.this.id
}

output "bindings" {
  description = "Per cluster, what each module did there: a list of `module`, `revision`, `applied_at` (RFC 3339) and `result` (`applied`, `failed`, `blocked`, `drifted`) — like ClusterResourceSetBindings. Read from the `gradual_module_assignment_status` data source after apply."
  value       = local.bindings
}

output "summary" {
  description = "How many clusters are in each state (`current`, `kept`, `outdated`, `joining`, `provisioning`, `drifted`, `blocked`, `failed`, `skipped`, `leaving`)."
  value       = gradual_module_assignment.this.summary
}

output "attention" {
  description = "The clusters needing attention, each with what is wrong (drifted objects and fields, failures, blocked modules, joins, leaves)."
  value       = gradual_module_assignment.this.attention
}

output "clusters" {
  description = "Names of the clusters that have a binding, sorted."
  value       = sort(keys(local.bindings))
}

output "skipped" {
  description = "Picked clusters this apply left alone, with the reason (not ready, paused, no kubeconfig Secret…). A later apply picks them up."
  value       = gradual_module_assignment.this.skipped
}

output "revisions" {
  description = "Per module, the revision (content hash) of its manifests."
  value       = gradual_module_assignment.this.revisions
}
