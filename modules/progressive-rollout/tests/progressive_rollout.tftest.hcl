# Runs against a test-bed fleet (go run ./cmd/gradual-testbed up; tools/moduletest.sh does all of
# this): KUBE_CONFIG_PATH is the management cluster's kubeconfig; run_id, from a -var-file
# (`tofu test -var-file=run.tfvars` with `run_id = "abc123"`), makes the names unique so repeated
# runs, both CLIs and the Go acceptance tests sharing the fleet do not collide. The test bed has
# prod-eu-1, prod-us-1 (env=prod) and staging-eu-1 (env=staging) in namespace "fleet".
# `tofu test` / `terraform test` destroy what the runs applied at the end.

# The management cluster comes from KUBE_CONFIG_PATH (read by the provider, like hashicorp/kubernetes):
# provider blocks of a test file cannot read TF_VAR_ variables the module does not declare.
provider "gradual" {}

variables {
  namespace            = "fleet"
  selector_expressions = [{ key = "env", operator = "In", values = ["prod", "staging"] }]
  canary               = ["staging-eu-1"]
  wave_size            = "50%"
  bake_time            = "2s"
  verify_timeout       = "2m"
  # The ephemeral inputs are set to their "none" (terraform test before the fix of
  # hashicorp/terraform#38974 refuses to apply when an optional ephemeral input is left unset).
  sensitive_manifests = ""
  registry_password   = ""
  registry_token      = ""
  registry_client_key = ""
}

# Bad input is refused by the module's validations; those runs need no fleet and are in
# plan_mock.tftest.hcl.

# The canary alone first, then the two production clusters together (50% of 3, rounded up);
# afterwards every picked cluster is current on the revision.
run "canary_then_waves" {
  command = apply

  variables {
    name      = "web-${var.run_id}"
    manifests = <<-EOT
      apiVersion: v1
      kind: Namespace
      metadata:
        name: web-${var.run_id}
      ---
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
        namespace: web-${var.run_id}
      spec:
        replicas: 1
        selector:
          matchLabels: { app: web }
        template:
          metadata:
            labels: { app: web }
          spec:
            containers:
              - name: web
                image: registry.example/web:1.0
      ---
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: web-settings
        namespace: web-${var.run_id}
      data:
        version: "1.0"
    EOT
  }

  assert {
    condition     = output.waves == "2 waves: 1 canary wave of 1 cluster, then 1 wave of 2 clusters"
    error_message = "waves \"${output.waves}\", want the canary, then the two prod clusters"
  }
  assert {
    condition     = output.summary == tomap({ current = 3 }) && length(output.attention) == 0
    error_message = "summary ${jsonencode(output.summary)}, attention ${jsonencode(output.attention)}; want three current clusters"
  }
  assert {
    condition     = sort(keys(output.cluster_revisions)) == tolist(["prod-eu-1", "prod-us-1", "staging-eu-1"])
    error_message = "picked ${jsonencode(keys(output.cluster_revisions))}"
  }
  assert {
    condition     = length(output.clusters) == 3 && alltrue([for c in output.clusters : c.state == "current" && c.revision == output.revision])
    error_message = "not every cluster is current on ${output.revision}: ${jsonencode(output.clusters)}"
  }
  assert {
    condition     = length(output.invalid_revisions) == 0 && length(output.skipped) == 0
    error_message = "invalid ${jsonencode(output.invalid_revisions)}, skipped ${jsonencode(output.skipped)}"
  }
}

# A new version rolls through the same waves; the old revision becomes every cluster's backup.
run "next_version" {
  command = apply

  variables {
    name      = "web-${var.run_id}"
    previous  = run.canary_then_waves.revision
    manifests = <<-EOT
      apiVersion: v1
      kind: Namespace
      metadata:
        name: web-${var.run_id}
      ---
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
        namespace: web-${var.run_id}
      spec:
        replicas: 1
        selector:
          matchLabels: { app: web }
        template:
          metadata:
            labels: { app: web }
          spec:
            containers:
              - name: web
                image: registry.example/web:1.1
      ---
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: web-settings
        namespace: web-${var.run_id}
      data:
        version: "1.1"
    EOT
  }

  assert {
    condition     = output.revision != var.previous
    error_message = "the revision did not change"
  }
  assert {
    condition     = length(output.clusters) == 3 && alltrue([for c in output.clusters : c.state == "current" && c.revision == output.revision && c.backup == var.previous])
    error_message = "want every cluster current on ${output.revision} with backup ${var.previous}: ${jsonencode(output.clusters)}"
  }
  assert {
    condition     = output.backup_revision == var.previous
    error_message = "backup_revision ${output.backup_revision}, want ${var.previous}"
  }
}
