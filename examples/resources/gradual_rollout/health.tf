# Health beyond readiness: the ingress controller's Deployment counts as healthy only once its
# smoke test passed (a condition a controller of yours sets), a Node going NotReady on a cluster
# after the change fails that cluster, and a check Job must complete in each cluster.
resource "gradual_rollout" "ingress_gated" {
  name      = "ingress-gated"
  namespace = "fleet"
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
    # Run in each cluster once the objects are ready (after the apply and after the bake); a Job
    # that fails or does not finish within its timeout fails the cluster. Deleted when done.
    check_job = {
      timeout  = "3m"
      manifest = <<-EOT
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: ingress-smoke-test
          namespace: ingress-nginx
        spec:
          backoffLimit: 1
          activeDeadlineSeconds: 120
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: curl
                  image: curlimages/curl:8.11.1
                  args: ["--fail", "--max-time", "10", "http://ingress-nginx-controller.ingress-nginx/healthz"]
      EOT
    }
  }
}
