# ingress.yaml to every production cluster through Flux: the provider publishes each revision to
# the registry and gates the waves; source-controller and kustomize-controller in the management
# cluster pull and apply it. The registry password is an ephemeral variable: it is in no plan and
# no state, and is given again on every run (TF_VAR_registry_password, also when applying a saved
# plan). `make validate-examples` validates this directory on OpenTofu and Terraform.
terraform {
  # The module's ephemeral inputs and the provider's write-only attributes need 1.11.
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

variable "registry_username" {
  description = "User the provider pushes the revisions with."
  type        = string
}

variable "registry_password" {
  description = "Password of registry_username (e.g. TF_VAR_registry_password from the CI's secret store)."
  type        = string
  sensitive   = true
  ephemeral   = true
}

module "ingress" {
  # Outside this repository: "git::https://github.com/gradual-dev/terraform-provider-gradual.git//modules/progressive-rollout?ref=v0.3.0"
  source = "../.."

  name            = "ingress"
  namespace       = "fleet"
  selector_labels = { env = "prod" }
  manifests       = file("${path.module}/ingress.yaml")

  canary    = ["prod-eu-1"]
  wave_size = "25%"
  bake_time = "5m"

  delivery = {
    flux = {
      repository = "oci://registry.example.com/fleet/ingress"
      username   = var.registry_username
      # source-controller pulls with this Secret (kubernetes.io/dockerconfigjson) in namespace
      # "fleet"; the provider never reads it.
      secret_ref = "registry-pull"
    }
  }
  registry_password = var.registry_password
}

output "ingress_waves" {
  value = module.ingress.waves
}
