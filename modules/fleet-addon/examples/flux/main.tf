# Calico and its BGP configuration on every Cluster labelled cni=calico, delivered by Flux: each
# module revision is an OCI artifact the provider publishes, and each (module, cluster) a
# Kustomization in the management cluster, calico-bgp's depending on calico's. The registry token
# is an ephemeral variable: in no plan and no state, given again on every run
# (TF_VAR_registry_token, also when applying a saved plan). `make validate-examples` validates
# this directory on OpenTofu and Terraform.
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

variable "registry_token" {
  description = "Token the provider pushes the module revisions with (e.g. TF_VAR_registry_token from the CI's secret store)."
  type        = string
  sensitive   = true
  ephemeral   = true
}

variable "registry_ca" {
  description = "PEM CA of the registry, for the provider; source-controller reads it from the Secret registry-ca."
  type        = string
}

module "cni" {
  # Outside this repository: "git::https://github.com/gradual-dev/terraform-provider-gradual.git//modules/fleet-addon?ref=v0.3.0"
  source = "../.."

  name            = "cni"
  namespace       = "fleet"
  selector_labels = { cni = "calico" }
  modules = [
    { name = "calico", version = "3.28.0", manifests = file("${path.module}/calico.yaml") },
    { name = "calico-bgp", version = "1.0.0", manifests = file("${path.module}/bgp.yaml"), depends_on = ["calico"] },
  ]
  update_limit = "10%"
  canary       = ["staging-eu-1"]

  delivery = {
    flux = {
      repository      = "oci://registry.example.com/fleet/addons"
      ca_bundle       = var.registry_ca
      secret_ref      = "registry-pull" # source-controller's pull credentials, in namespace "fleet"
      cert_secret_ref = "registry-ca"   # its ca.crt, for source-controller
    }
  }
  registry_token = var.registry_token
}

output "cni_attention" {
  value = module.cni.attention
}
