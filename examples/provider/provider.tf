# Connect to the management cluster, where the Cluster API Cluster objects live.
provider "gradual" {
  config_path    = "~/.kube/config"
  config_context = "mgmt"

  # A CI job killed mid-apply leaves its Lease behind; the next apply of the same rollout waits
  # this long before taking over (default 60s).
  lease_duration = "60s"
}

# Or pass the kubeconfig itself (kept out of state):
# provider "gradual" {
#   kubeconfig_raw = var.management_kubeconfig
# }

# Or a host with a token or a client certificate:
# provider "gradual" {
#   host                   = "https://mgmt.example.com:6443"
#   token                  = var.management_token
#   cluster_ca_certificate = file("mgmt-ca.pem")
#   request_timeout        = "1m" # each request; default 30s
# }

# Or an exec credential plugin, as for an EKS management cluster:
# provider "gradual" {
#   host                   = data.aws_eks_cluster.mgmt.endpoint
#   cluster_ca_certificate = base64decode(data.aws_eks_cluster.mgmt.certificate_authority[0].data)
#   exec {
#     api_version = "client.authentication.k8s.io/v1beta1"
#     command     = "aws"
#     args        = ["eks", "get-token", "--cluster-name", "mgmt"]
#   }
# }

# Or nothing in the block: KUBE_CONFIG_PATH / KUBE_CTX, KUBE_HOST / KUBE_TOKEN and the other
# KUBE_* variables, or, in a pod, its ServiceAccount.
# provider "gradual" {}
