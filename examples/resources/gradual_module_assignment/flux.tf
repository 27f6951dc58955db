# Two modules delivered through Flux: the provider plans and gates the waves, and Flux's
# kustomize-controller in the management cluster applies each module through one Kustomization
# per (module, cluster). The Kustomization of "cni-config" names that of "cni" on the same
# cluster in its dependsOn, so Flux keeps the order between applies too.
resource "gradual_module_assignment" "networking" {
  name      = "networking"
  namespace = "fleet"
  selector  = { match_labels = { env = "prod" } }
  mode      = "Reconcile" # Flux repairs drift between applies; "ApplyOnce": Flux creates objects once

  modules = [
    {
      name      = "cni"
      version   = "3.28.0"
      manifests = file("${path.module}/calico.yaml")
    },
    {
      name       = "cni-config"
      version    = "1.0.0"
      depends_on = ["cni"]
      manifests  = file("${path.module}/bgp.yaml")
    },
  ]

  delivery = {
    flux = {
      repository = "oci://registry.example.com/fleet/networking"
    }
  }
}
