# The quickstart that `make demo` runs against a local fleet (see tools/demo.sh): a demo app
# rolled out to every production cluster, one cluster per wave, verified after each wave.
terraform {
  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
    }
  }
  required_version = ">= 1.8.0"
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the management cluster (make demo passes the local fleet's)."
  type        = string
}

variable "namespace" {
  description = "Namespace of the Cluster API Cluster objects."
  type        = string
  default     = "fleet"
}

variable "app_version" {
  description = "Version of the demo app to roll out."
  type        = string
  default     = "1.27"
}

variable "broken" {
  description = "Roll out a revision that can never become ready (to see verification, restore and the invalid ledger)."
  type        = bool
  default     = false
}

provider "gradual" {
  config_path = var.kubeconfig_path
}

data "gradual_clusters" "all" {
  namespace = var.namespace
}

locals {
  manifests = templatefile("${path.module}/app.yaml.tftpl", { version = var.app_version, broken = var.broken })
}

resource "gradual_rollout" "web" {
  name         = "web"
  namespace    = var.namespace
  selector     = { match_labels = { env = "prod" } }
  manifests    = local.manifests
  update_limit = "1"
  verify       = { timeout = "60s", bake_time = "2s" }
}

output "fleet" {
  description = "Every cluster, and the reason a rollout would skip it, if any."
  value       = { for c in data.gradual_clusters.all.clusters : c.name => c.eligible ? "eligible (${c.phase})" : "skipped: ${c.skip_reason}" }
}

output "revision" {
  description = "The revision of the manifests, known at plan time."
  value       = provider::gradual::revision(local.manifests)
}

output "summary" {
  description = "How many production clusters are in each state; `attention` names any that are not current."
  value       = gradual_rollout.web.summary
}

# Per-cluster detail comes from a data source, so that the rollout's plan stays readable at any
# fleet size.
data "gradual_rollout_status" "web" {
  namespace  = gradual_rollout.web.namespace
  name       = gradual_rollout.web.name
  depends_on = [gradual_rollout.web]
}

output "clusters" {
  description = "What each production cluster runs."
  value       = { for c in data.gradual_rollout_status.web.clusters : c.name => "${c.revision} (${c.state}, backup ${c.backup == "" ? "none" : c.backup})" }
}

output "invalid_revisions" {
  value = [for r in gradual_rollout.web.invalid_revisions : "${r.revision} failed on ${join(", ", r.clusters)}: ${r.reason}"]
}

# Add-ons on every production cluster, including clusters that join later (the
# ClusterResourceSet replacement).
resource "gradual_module_assignment" "addons" {
  name      = "addons"
  namespace = var.namespace
  selector  = { match_labels = { env = "prod" } }
  modules = [
    { name = "monitoring", version = "1.8.2", manifests = file("${path.module}/addons.yaml") },
  ]
  mode         = "Reconcile"
  update_limit = "50%"
  verify       = { timeout = "60s" }
}

# Every cluster's bindings, read after the assignment applies (its plan shows only counts and
# the clusters needing attention).
data "gradual_module_assignment_status" "addons" {
  namespace  = gradual_module_assignment.addons.namespace
  name       = gradual_module_assignment.addons.name
  depends_on = [gradual_module_assignment.addons]
}

output "addons" {
  description = "Which cluster runs which add-on revision."
  value       = { for c in data.gradual_module_assignment_status.addons.clusters : c.name => [for b in c.bindings : "${b.module}@${b.revision} (${b.result})"] }
}

# An in-place Kubernetes upgrade of a MachineDeployment through a CAPI update extension (make
# demo runs the project's reference extension). Off unless a MachineDeployment is named.
variable "inplace" {
  description = "The MachineDeployment to upgrade in place and the update extension to use; null to skip."
  type = object({
    cluster            = string
    machine_deployment = string
    version            = string
    extension_url      = string
    extension_ca_file  = string
  })
  default = null
}

resource "gradual_inplace_update" "workers" {
  count              = var.inplace == null ? 0 : 1
  namespace          = var.namespace
  cluster            = var.inplace.cluster
  machine_deployment = var.inplace.machine_deployment
  version            = var.inplace.version
  extensions = [{
    name      = "reference-updater"
    url       = var.inplace.extension_url
    ca_bundle = file(var.inplace.extension_ca_file)
  }]
  fallback = "none"
  verify   = { timeout = "60s" }
}

output "machines" {
  description = "Per machine: how it is updated and how it ended."
  value       = var.inplace == null ? null : gradual_inplace_update.workers[0].status
}
