# Calico and its BGP configuration, and metrics-server, on every cluster labelled cni=calico,
# including clusters that get the label later. The BGP module needs Calico's CRDs, so it depends
# on it. A change to a module goes out to 10% of the clusters at a time, each verified before the
# next.
resource "gradual_module_assignment" "cni" {
  name      = "cni"
  namespace = "fleet"
  selector  = { match_labels = { cni = "calico" } }

  modules = [
    {
      name      = "calico"
      version   = "3.28.0"
      manifests = file("${path.module}/calico.yaml")
    },
    {
      name       = "calico-bgp"
      version    = "1.0.0"
      manifests  = file("${path.module}/bgp.yaml")
      depends_on = ["calico"]
      # Secrets (BGP passwords): write-only, never shown in a plan or kept in the state; a changed
      # value still plans an update (the module's revision covers it).
      # sensitive_manifests = file("${path.module}/bgp-secrets.yaml")
    },
    {
      # `helm template` output: its namespaced objects name no namespace, so they go to
      # default_namespace; the ClusterRole stays cluster-scoped. The revision is that of the same
      # objects written with `namespace: kube-system`.
      name              = "metrics-server"
      version           = "3.12.2"
      manifests         = file("${path.module}/metrics-server.yaml")
      default_namespace = "kube-system"
    },
  ]

  mode            = "Reconcile" # or "ApplyOnce": like ClusterResourceSet, never re-applied
  update_limit    = "10%"
  canary          = ["staging-eu-1"] # each module is verified here before it goes anywhere else
  on_failure      = "rollback"       # past max_failures, undo a module everywhere this apply took it
  deletion_policy = "delete"         # clusters that lose the label lose the modules
  verify          = { timeout = "5m" }
}

# The same modules on clusters named one by one instead of by label. force_conflicts takes
# fields another server-side applier (a ClusterResourceSet being retired, Helm) owns.
resource "gradual_module_assignment" "lab" {
  name            = "lab"
  namespace       = "fleet"
  names           = ["lab-1", "lab-2"]
  force_conflicts = true

  modules = [{
    name      = "calico"
    version   = "3.28.0"
    manifests = file("${path.module}/calico.yaml")
  }]
}

# The plan shows `summary` (clusters per state), `attention` (clusters needing it, with what is
# wrong) and `waves` (one line of counts per module); every cluster's bindings are in the
# gradual_module_assignment_status data source.
output "cni_attention" {
  value = gradual_module_assignment.cni.attention
}
