output "id" {
  description = "`namespace/cluster/machine_deployment`."
  value       = gradual_inplace_update.this.id
}

output "revision" {
  description = "Short hash of the change; the MachineDeployment carries it in the `gradual.dev/inplace-update` annotation once written."
  value       = gradual_inplace_update.this.revision
}

output "plan" {
  description = "The plan per Machine (sorted by name): `name`, `node`, `changed_fields`, `strategy` (`in-place`, `rolling`, `blocked`, `unchanged`), `extensions`, `coverage`, `uncovered_fields`, `notes`."
  value       = gradual_inplace_update.this.plan
}

output "machines" {
  description = "Per Machine: its `node`, `strategy`, the `extensions` that update it in place, the `uncovered_fields` and, after apply, its `status`."
  value = {
    for m in gradual_inplace_update.this.plan : m.name => {
      node             = m.node
      strategy         = m.strategy
      extensions       = m.extensions
      uncovered_fields = m.uncovered_fields
      status           = lookup(gradual_inplace_update.this.status, m.name, null)
    }
  }
}

output "status" {
  description = "Per Machine after apply: `updated` (same Machine, in place), `replaced`, `created` (by Cluster API), `unchanged`, `failed` or `not-started`."
  value       = gradual_inplace_update.this.status
}

output "in_place_machines" {
  description = "Machines updated in place."
  value       = [for m in gradual_inplace_update.this.plan : m.name if m.strategy == "in-place"]
}

output "replaced_machines" {
  description = "Machines the plan expects Cluster API to replace (`fallback = \"rolling\"`)."
  value       = [for m in gradual_inplace_update.this.plan : m.name if m.strategy == "rolling"]
}
