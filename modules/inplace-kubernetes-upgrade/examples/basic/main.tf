# Kubernetes v1.36.3 on every prod cluster: its control plane, then its worker pools, in place
# where Cluster API's update extensions cover the change, two clusters at a time, prod-eu-1 first.
# `make validate-examples` validates this directory on OpenTofu and Terraform.
terraform {
  required_version = ">= 1.11.0"
  required_providers {
    gradual = {
      source  = "gradual-dev/gradual"
      version = "~> 0.3.0"
    }
  }
}

provider "gradual" {
  config_path = var.kubeconfig_path
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the management cluster."
  type        = string
}

module "prod_v1_36_3" {
  # Outside this repository: "git::https://github.com/gradual-dev/terraform-provider-gradual.git//modules/inplace-kubernetes-upgrade?ref=v0.3.0"
  source = "../.."

  namespace                   = "fleet"
  selector_labels             = { env = "prod" }
  update_control_plane        = true
  machine_deployment_selector = { match_labels = { pool = "workers" } }
  kubernetes_version          = "v1.36.3"

  canary         = ["prod-eu-1"]
  update_limit   = "2"
  max_failures   = "0"
  verify_timeout = "15m"
}

output "waves" {
  value = module.prod_v1_36_3.waves
}
