terraform {
  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
    }
  }
  required_version = ">= 1.8.0"
}

provider "gradual" {
  config_path = var.kubeconfig_path
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the management cluster."
  type        = string
}
