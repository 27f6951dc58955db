# An in-place Kubernetes upgrade of the workers of every cluster labelled env=edge, one cluster
# at a time, edge-1 first, done by Cluster API (feature gate InPlaceUpdates) through the update
# extensions registered in the management cluster (ExtensionConfig). The plan shows the waves,
# a summary and the clusters to look at; apply writes each cluster's MachineDeployments and
# waits until Cluster API has updated every machine and its Node reports the new version. The
# first cluster that fails stops the update (max_failures "0"); nothing is rolled back, and
# applying again goes on where it stopped.
#
# `make demo` runs it against the real Cluster API controllers (gradual-testbed up --cluster-api,
# in-memory clusters edge-1..3).
terraform {
  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
    }
  }
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the management cluster (where the CAPI Clusters live)."
  type        = string
}

variable "namespace" {
  description = "Namespace of the CAPI Clusters."
  type        = string
  default     = "capi"
}

variable "kubernetes_version" {
  description = "Version to update the workers to, e.g. v1.34.1."
  type        = string
}

provider "gradual" {
  config_path = var.kubeconfig_path
}

resource "gradual_inplace_update" "edge_workers" {
  namespace                   = var.namespace
  selector                    = { match_labels = { env = "edge" } }
  machine_deployment_selector = {} # every MachineDeployment of each cluster
  version                     = var.kubernetes_version

  canary       = ["edge-1"]
  update_limit = "1"
  max_failures = "0"
  fallback     = "none" # refuse the plan if Cluster API would replace any machine
  verify       = { timeout = "3m" }
}

# Per machine, read-only: which extension updates it in place (or why it would be replaced).
data "gradual_inplace_update_plan" "edge_workers" {
  namespace                   = var.namespace
  selector                    = { match_labels = { env = "edge" } }
  machine_deployment_selector = {}
  version                     = var.kubernetes_version
}

output "summary" {
  value = gradual_inplace_update.edge_workers.summary
}

output "waves" {
  value = gradual_inplace_update.edge_workers.waves
}

output "status" {
  description = "Per machine after apply: updated (the same Machine, in place), replaced, created, unchanged, failed."
  value       = gradual_inplace_update.edge_workers.status
}

output "preview" {
  value = { for m in data.gradual_inplace_update_plan.edge_workers.machines : m.name => "${m.strategy} by ${join(", ", m.extensions)}" }
}
