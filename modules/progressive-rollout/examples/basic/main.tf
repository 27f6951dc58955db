# ingress.yaml to every production cluster: the canary first, then a quarter of the fleet at a
# time, each wave verified, health-checked and baked; eu before us, this apply stopping after eu.
# The ingress's TLS key comes in an ephemeral variable and goes out as a Secret in
# `sensitive_manifests`: it is in no plan and no state. `make validate-examples` validates this
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

variable "ingress_tls" {
  description = "PEM certificate and key of the ingress (e.g. TF_VAR_ingress_tls, or an ephemeral resource of a secrets manager); given again on every run."
  type = object({
    cert = string
    key  = string
  })
  sensitive = true
  ephemeral = true
}

module "ingress" {
  # Outside this repository: "git::https://github.com/gradual-dev/terraform-provider-gradual.git//modules/progressive-rollout?ref=v0.3.0"
  source = "../.."

  name            = "ingress"
  namespace       = "fleet"
  selector_labels = { env = "prod" }
  manifests       = file("${path.module}/ingress.yaml")
  sensitive_manifests = yamlencode({
    apiVersion = "v1"
    kind       = "Secret"
    metadata   = { name = "ingress-tls", namespace = "ingress" }
    type       = "kubernetes.io/tls"
    data       = { "tls.crt" = base64encode(var.ingress_tls.cert), "tls.key" = base64encode(var.ingress_tls.key) }
  })

  canary    = ["prod-eu-1"]
  wave_size = "25%"
  bake_time = "5m"

  stages = [
    { name = "eu", match_labels = { region = "eu" } },
    { name = "us", match_labels = { region = "us" } },
  ]
  promote_until = "eu"

  max_unsettled = "1"
  health_checks = [{
    api_version = "apps/v1"
    kind        = "Deployment"
    current     = "status.?conditions.orValue([]).exists(e, e.type == 'Available' && e.status == 'True')"
  }]
}

output "ingress_summary" {
  value = module.ingress.summary
}
