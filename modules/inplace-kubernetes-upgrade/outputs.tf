output "id" {
  description = "`namespace/cluster/machine_deployment` (one cluster) or `namespace/fleet:<hash>` (a fleet, the hash of the clusters and owners picked)."
  value       = gradual_inplace_update.this.id
}

output "revision" {
  description = "Short hash of the change; each updated owner (MachineDeployment, control plane) carries it in the `gradual.dev/inplace-update` annotation once written."
  value       = gradual_inplace_update.this.revision
}

output "plan" {
  description = "One-cluster form: the plan per Machine (sorted by name): `name`, `node`, `changed_fields`, `strategy` (`in-place`, `rolling`, `blocked`, `unchanged`), `extensions`, `coverage`, `uncovered_fields`, `notes`. Empty in the fleet form (see `waves`, `summary`, `attention`)."
  value       = local.machine_plan
}

output "machines" {
  description = "Per Machine: its `node`, `strategy`, the `extensions` that update it in place, the `uncovered_fields` and, after apply, its `status`."
  value = {
    for m in local.machine_plan : m.name => {
      node             = m.node
      strategy         = m.strategy
      extensions       = m.extensions
      uncovered_fields = m.uncovered_fields
      status           = try(gradual_inplace_update.this.status[m.name], null)
    }
  }
}

output "status" {
  description = "One-cluster form, per Machine after apply: `updated` (same Machine, in place), `replaced`, `created` (by Cluster API), `unchanged`, `failed` or `not-started`."
  value       = gradual_inplace_update.this.status
}

output "in_place_machines" {
  description = "Machines updated in place."
  value       = [for m in local.machine_plan : m.name if m.strategy == "in-place"]
}

output "replaced_machines" {
  description = "Machines the plan expects Cluster API to replace (`fallback = \"rolling\"`)."
  value       = [for m in local.machine_plan : m.name if m.strategy == "rolling"]
}

output "waves" {
  description = "Fleet form: the planned waves in one line, as counts in order, the `canary` waves first (e.g. `\"3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster\"`). Known after apply on a create or when the clusters picked change."
  value       = gradual_inplace_update.this.waves
}

output "summary" {
  description = "Fleet form: the update in numbers: `clusters` picked, `skipped`, `current` (already done), `changing`; machines `in_place`, `rolling` and `unchanged`. Known after apply while a plan changes anything (the plan's `In-Place Preview` warning shows it as the extensions answer then)."
  value       = gradual_inplace_update.this.summary
}

output "attention" {
  description = "Fleet form: the clusters to look at, with why: skipped (and the reason), machines Cluster API will replace (and the fields that force it), an earlier apply that did not finish. Empty when every picked cluster is updated in place or done."
  value       = gradual_inplace_update.this.attention
}
