# Health beyond readiness: the ingress controller's Deployment counts as healthy only once its
# smoke test passed (a condition a controller of yours sets), and a Node going NotReady on a
# cluster after the change fails that cluster.
resource "gradual_rollout" "ingress_gated" {
  name      = "ingress-gated"
  selector  = { match_labels = { env = "staging" } }
  manifests = file("${path.module}/ingress.yaml")

  verify = {
    timeout   = "5m"
    bake_time = "2m"
    # Flux's healthCheckExprs: objects of a listed kind are judged by these instead of kstatus.
    health_checks = [{
      api_version = "apps/v1"
      kind        = "Deployment"
      current     = "status.?conditions.orValue([]).exists(e, e.type == 'SmokeTested' && e.status == 'True')"
      failed      = "status.?conditions.orValue([]).exists(e, e.type == 'SmokeTested' && e.status == 'False')"
    }]
    # The default: the Cluster's Available condition and every Node's Ready condition are read
    # before each wave and after the change and the bake.
    cluster_gates = true
  }
}
