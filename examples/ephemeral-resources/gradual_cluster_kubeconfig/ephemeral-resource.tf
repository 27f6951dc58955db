# Credentials of one workload cluster, for the kubernetes and helm providers. Nothing of them is
# written to the state or the plan file (Terraform >= 1.10, OpenTofu >= 1.11).
ephemeral "gradual_cluster_kubeconfig" "prod_eu_1" {
  namespace = "fleet"
  name      = "prod-eu-1"
}

provider "kubernetes" {
  alias                  = "prod_eu_1"
  host                   = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.host
  cluster_ca_certificate = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.cluster_ca_certificate
  token                  = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.token
  client_certificate     = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.client_certificate
  client_key             = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.client_key
}

provider "helm" {
  alias = "prod_eu_1"
  kubernetes = {
    host                   = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.host
    cluster_ca_certificate = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.cluster_ca_certificate
    token                  = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.token
    client_certificate     = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.client_certificate
    client_key             = ephemeral.gradual_cluster_kubeconfig.prod_eu_1.client_key
  }
}
