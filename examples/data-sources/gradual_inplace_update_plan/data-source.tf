# What an upgrade of md-0 to v1.36.3 with new NTP servers would do, machine by machine,
# according to the update extension that can change machines in place.
data "gradual_inplace_update_plan" "workers" {
  namespace          = "fleet"
  cluster            = "prod-eu-1"
  machine_deployment = "md-0"
  version            = "v1.36.3"
  bootstrap_config_spec_patch = jsonencode({
    ntp = { servers = ["time.example.com"] }
  })
  extensions = [{
    name      = "bare-metal-updater"
    url       = "https://updater.example.com:9443"
    ca_bundle = file("updater-ca.pem")
    timeout   = "10s"
  }]
  fallback = "rolling" # show uncovered machines as replaced instead of failing the plan
}

output "replaced_machines" {
  value = [for m in data.gradual_inplace_update_plan.workers.machines : "${m.name}: ${join(", ", m.uncovered_fields)}" if m.strategy == "rolling"]
}

# Fail the plan if any machine would be replaced rather than updated in place.
check "all_in_place" {
  assert {
    condition     = data.gradual_inplace_update_plan.workers.counts.rolling == 0
    error_message = "Some machines cannot be updated in place: ${join("; ", [for m in data.gradual_inplace_update_plan.workers.machines : m.name if m.strategy == "rolling"])}"
  }
}

# The same question over a fleet: the workers of every prod cluster, machine by machine, and
# which machines belong to which cluster.
data "gradual_inplace_update_plan" "prod" {
  namespace                   = "fleet"
  selector                    = { match_labels = { env = "prod" } }
  machine_deployment_selector = { match_labels = { pool = "workers" } }
  version                     = "v1.36.3"
}

output "prod_machines_by_cluster" {
  value = data.gradual_inplace_update_plan.prod.clusters
}
