# One set of modules, per-cluster values: the cloud controller and external-dns need each
# cluster's name and region; external-dns also a zone per cluster.
resource "gradual_module_assignment" "cloud" {
  name      = "cloud"
  namespace = "fleet"
  selector  = { match_labels = { provider = "aws" } }

  values = {
    # Variable => Cluster label (or annotation) key.
    from_labels      = { region = "topology.kubernetes.io/region" }
    from_annotations = { zone_id = "example.com/dns-zone-id" }
    # Variables for the clusters whose labels match, then for one cluster by name (those win).
    selected = [{ match_labels = { tier = "edge" }, values = { interval = "30s" } }]
    clusters = { "prod-us-1" = { interval = "10s" } }
  }

  # Every module is a template: ${cluster_name}, ${cluster_namespace} and the ClusterClass
  # variables (spec.topology.variables) by name are always there, ${var:=default} gives a
  # default. A variable a cluster does not get, without a default, fails the plan naming the
  # cluster, the module and the variable. Inside an HCL string, write $${ for ${ (Terraform
  # would interpolate it); a file read with file() needs no escaping.
  modules = [
    {
      name      = "cloud-controller"
      version   = "1.30.0"
      manifests = file("${path.module}/cloud-controller.yaml")
    },
    {
      name       = "external-dns"
      version    = "0.14.2"
      depends_on = ["cloud-controller"]
      manifests  = <<-EOT
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
    },
  ]

  # The check Job runs on each cluster after its modules, rendered with the same values.
  verify = {
    check_job = {
      manifest = <<-EOT
        apiVersion: batch/v1
        kind: Job
        metadata: {name: dns-smoke, namespace: kube-system}
        spec:
          backoffLimit: 1
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: smoke
                  image: registry.example/dns-smoke:1
                  args: ["--region=$${region}", "--zone-id=$${zone_id}"]
      EOT
    }
  }
}
