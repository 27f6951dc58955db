# Connect to the management cluster, where the Cluster API Cluster objects live.
provider "gradual" {
  kubeconfig_path = "~/.kube/config"
  context         = "mgmt"
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
# }
