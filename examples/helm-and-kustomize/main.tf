# Roll out what Helm and Kustomize render, as one verified bundle. The rendered files stand for
#   helm template podinfo ./charts/podinfo --set replicaCount=2 > rendered/podinfo.yaml
#   kubectl kustomize overlays/prod                            > rendered/overlay.yaml
# (see the "Helm and Kustomize" guide for rendering inside Terraform with the helm provider's
# helm_template data source or the kustomization provider instead). Neither names a namespace
# for its namespaced objects: default_namespace puts them in "podinfo"; the Namespace itself
# and the ClusterRole stay cluster-scoped.

variable "namespace" {
  description = "Namespace of the Cluster API Cluster objects."
  type        = string
  default     = "fleet"
}

variable "clusters" {
  description = "Clusters to roll out to."
  type        = list(string)
  default     = ["prod-eu-1", "prod-us-1"]
}

locals {
  helm_output      = file("${path.module}/rendered/podinfo.yaml")
  kustomize_output = file("${path.module}/rendered/overlay.yaml")
}

resource "gradual_rollout" "podinfo" {
  name              = "podinfo"
  namespace         = var.namespace
  names             = var.clusters
  manifests         = join("\n---\n", [local.kustomize_output, local.helm_output])
  default_namespace = "podinfo"

  # The chart ships an HorizontalPodAutoscaler: leave the replica count to it.
  ignore_fields = [
    { kind = "Deployment", name = "podinfo", paths = [".spec.replicas"] },
  ]

  verify = { timeout = "2m" }
}

output "revision" {
  value = gradual_rollout.podinfo.revision
}
