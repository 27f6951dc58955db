# The quickstart that `make demo` runs against a local fleet (see tools/demo.sh).
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

provider "gradual" {
  kubeconfig_path = var.kubeconfig_path
}

data "gradual_clusters" "all" {
  namespace = var.namespace
}

data "gradual_clusters" "prod" {
  namespace = var.namespace
  selector  = { match_labels = { env = "prod" } }
}

output "fleet" {
  description = "Every cluster with the reason a rollout would skip it, if any."
  value       = { for c in data.gradual_clusters.all.clusters : c.name => c.eligible ? "eligible (${c.phase})" : "skipped: ${c.skip_reason}" }
}

output "prod_clusters" {
  value = data.gradual_clusters.prod.eligible_names
}

output "app_revision" {
  description = "The revision a rollout of app.yaml carries, known at plan time."
  value       = provider::gradual::revision(file("${path.module}/app.yaml"))
}
