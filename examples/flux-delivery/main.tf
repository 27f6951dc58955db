# The Flux step of `make demo` (see tools/demo.sh): the same kind of rollout as the quickstart,
# but Flux's controllers in the management cluster deliver each revision, and the provider gates
# the waves. The runner needs only the management cluster and the registry.
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

variable "repository" {
  description = "OCI repository each revision is published to (make demo passes the local registry's)."
  type        = string
}

variable "namespace" {
  description = "Namespace of the Cluster API Cluster objects."
  type        = string
  default     = "fleet"
}

variable "greeting" {
  description = "What the demo ConfigMap says: a change of it is a new revision."
  type        = string
  default     = "hello"
}

variable "broken" {
  description = "Roll out a revision the workload API servers refuse (to see restore by re-pinning and the invalid ledger)."
  type        = bool
  default     = false
}

provider "gradual" {
  config_path = var.kubeconfig_path
}

resource "gradual_rollout" "greeter" {
  name      = "greeter"
  namespace = var.namespace
  names     = ["prod-eu-1", "prod-us-1", "staging-eu-1"]
  canary    = ["staging-eu-1"]
  manifests = templatefile("${path.module}/greeter.yaml.tftpl", { greeting = var.greeting, broken = var.broken })
  verify    = { timeout = "60s" }

  delivery = {
    flux = {
      repository = var.repository
      insecure   = true # the demo's registry serves plain HTTP on 127.0.0.1
    }
  }
}

output "waves" {
  value = gradual_rollout.greeter.waves
}

output "summary" {
  value = gradual_rollout.greeter.summary
}

output "invalid_revisions" {
  value = [for r in gradual_rollout.greeter.invalid_revisions : "${r.revision} failed on ${join(", ", r.clusters)}: ${substr(trimspace(r.reason), 0, 140)}"]
}
