# Flux delivers, the provider gates: the runner needs only the management cluster and the
# registry. Each revision is published as an OCI artifact; Flux's kustomize-controller applies
# it to each cluster through the Cluster's kubeconfig Secret.
variable "registry_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "gradual_rollout" "web_over_flux" {
  name      = "web"
  namespace = "fleet"
  selector  = { match_labels = { env = "prod" } }
  canary    = ["prod-eu-1"]
  manifests = file("${path.module}/ingress.yaml")
  verify    = { timeout = "3m" }

  delivery = {
    flux = {
      repository = "oci://registry.internal.example:5000/fleet/web"
      # What this provider pushes with: write-only, never in the plan or the state.
      username  = "fleet-push"
      password  = var.registry_password
      ca_bundle = file("${path.module}/registry-ca.pem")
      # What source-controller pulls with: Secrets in each Cluster's namespace.
      secret_ref      = "registry-pull"
      cert_secret_ref = "registry-ca"
    }
  }
}
