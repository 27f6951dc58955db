# One bundle, per-cluster values: external-dns needs each cluster's name and region.
resource "gradual_rollout" "external_dns" {
  name      = "external-dns"
  namespace = "fleet"
  selector  = { match_labels = { env = "prod" } }

  values = {
    # Variable => Cluster label (or annotation) key.
    from_labels      = { region = "topology.kubernetes.io/region" }
    from_annotations = { zone_id = "example.com/dns-zone-id" }
    # Variables for the clusters whose labels match, then for one cluster by name (those win).
    selected = [{ match_labels = { tier = "edge" }, values = { interval = "30s" } }]
    clusters = { "prod-us-1" = { interval = "10s" } }
  }

  # ${cluster_name} and ${cluster_namespace} are always there; ClusterClass variables
  # (spec.topology.variables) too, by name. ${var:=default} gives a default. A variable a
  # cluster does not get, without a default, fails the plan. Inside an HCL string, write $${
  # for ${ (Terraform would interpolate it); a file read with file() needs no escaping.
  manifests = <<-EOT
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: external-dns
      namespace: kube-system
    data:
      txt-owner-id: "$${cluster_name}"
      aws-region: "$${region}"
      zone-id: "$${zone_id}"
      interval: "$${interval:=1m}"
  EOT
}
