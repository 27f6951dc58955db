# Calico and its BGP configuration on every Cluster labelled cni=calico, 10% of the clusters at a
# time, the BGP module after Calico on each cluster; external-dns configured per cluster from its
# region label. The BGP password comes in an ephemeral variable and goes out as a Secret of the
# calico-bgp module: it is in no plan and no state. `make validate-examples` validates this
# directory on OpenTofu and Terraform.
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

variable "bgp_password" {
  description = "Password of the BGP peers (e.g. TF_VAR_bgp_password, or an ephemeral resource of a secrets manager); given again on every run."
  type        = string
  sensitive   = true
  ephemeral   = true
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
  # Per module name: its Secrets, never in the plan or the state.
  sensitive_manifests = {
    calico-bgp = yamlencode({
      apiVersion = "v1"
      kind       = "Secret"
      metadata   = { name = "bgp-password", namespace = "calico-system" }
      stringData = { password = var.bgp_password }
    })
  }
  mode            = "Reconcile"
  update_limit    = "10%"
  canary          = ["staging-eu-1"]
  deletion_policy = "delete"
  verify_timeout  = "5m"

  values = {
    from_labels = { region = "topology.kubernetes.io/region" }
  }
  preview = "canary"
}

output "cni_attention" {
  value = module.cni.attention
}
