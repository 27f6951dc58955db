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
  namespace       = "fleet"
  selector_labels = { env = "prod" }
  update_limit    = "50%"
  verify_timeout  = "2m"
  # The ephemeral inputs are set to their "none" (terraform test before the fix of
  # hashicorp/terraform#38974 refuses to apply when an optional ephemeral input is left unset).
  sensitive_manifests = {}
  registry_password   = ""
  registry_token      = ""
  registry_client_key = ""
}

# Bad input is refused by the module's validations; those runs need no fleet and are in
# plan_mock.tftest.hcl.

# Clusters by name, a canary and the rollout's failure and conflict settings reach the assignment
# as given (plan only: the provider plans the canary's wave first).
run "passes_names_canary_and_failure_settings" {
  command = plan

  variables {
    name            = "addon-${var.run_id}"
    names           = ["prod-eu-1", "staging-eu-1"]
    canary          = ["staging-eu-1"]
    on_failure      = "rollback"
    force_conflicts = true
    adopt           = false
    modules         = [{ name = "settings", version = "1", manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n" }]
  }

  assert {
    condition     = gradual_module_assignment.this.selector == null && gradual_module_assignment.this.names == tolist(["prod-eu-1", "staging-eu-1"])
    error_message = "want names and no selector, got names ${jsonencode(gradual_module_assignment.this.names)}"
  }
  assert {
    condition     = gradual_module_assignment.this.canary == tolist(["staging-eu-1"]) && gradual_module_assignment.this.on_failure == "rollback"
    error_message = "canary or on_failure not passed through"
  }
  assert {
    condition     = gradual_module_assignment.this.force_conflicts && !gradual_module_assignment.this.adopt
    error_message = "force_conflicts or adopt not passed through"
  }
}

# The bundle lands on both production clusters and nowhere else, each binding applied.
run "binds_prod_clusters" {
  command = apply

  variables {
    name = "addon-${var.run_id}"
    modules = [
      {
        name      = "namespace"
        version   = "1.0.0"
        manifests = <<-EOT
          apiVersion: v1
          kind: Namespace
          metadata:
            name: addon-${var.run_id}
        EOT
      },
      {
        name       = "settings"
        version    = "1.0.0"
        depends_on = ["namespace"]
        manifests  = <<-EOT
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: settings
            namespace: addon-${var.run_id}
          data:
            level: "1"
        EOT
      },
    ]
  }

  assert {
    condition     = output.clusters == tolist(["prod-eu-1", "prod-us-1"])
    error_message = "bindings on ${jsonencode(output.clusters)}, want prod-eu-1 and prod-us-1"
  }
  assert {
    condition     = alltrue(flatten([for c, bs in output.bindings : [for b in bs : b.result == "applied"]]))
    error_message = "not every binding applied: ${jsonencode(output.bindings)}"
  }
  assert {
    condition     = alltrue([for c, bs in output.bindings : length(bs) == 2])
    error_message = "want both modules bound on every cluster: ${jsonencode(output.bindings)}"
  }
  assert {
    condition     = length(output.skipped) == 0
    error_message = "skipped: ${jsonencode(output.skipped)}"
  }
  assert {
    condition     = output.summary == tomap({ current = 2 }) && length(output.attention) == 0
    error_message = "summary ${jsonencode(output.summary)}, attention ${jsonencode(output.attention)}; want 2 current, none needing attention"
  }
}

# A changed module goes out again (Reconcile): every binding of it carries the new revision. The
# changed ConfigMap names no namespace, as rendered output often does not: default_namespace
# places it where it was.
run "reconciles_a_changed_module" {
  command = apply

  variables {
    name              = "addon-${var.run_id}"
    previous_settings = run.binds_prod_clusters.revisions["settings"]
    modules = [
      {
        name      = "namespace"
        version   = "1.0.0"
        manifests = <<-EOT
          apiVersion: v1
          kind: Namespace
          metadata:
            name: addon-${var.run_id}
        EOT
      },
      {
        name              = "settings"
        version           = "1.1.0"
        depends_on        = ["namespace"]
        default_namespace = "addon-${var.run_id}"
        manifests         = <<-EOT
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: settings
          data:
            level: "2"
        EOT
      },
    ]
  }

  assert {
    condition     = output.revisions["settings"] != var.previous_settings
    error_message = "the settings module's revision did not change"
  }
  assert {
    condition = alltrue([
      for c, bs in output.bindings : anytrue([for b in bs : b.module == "settings" && b.revision == output.revisions["settings"] && b.result == "applied"])
    ])
    error_message = "not every cluster runs the new settings revision: ${jsonencode(output.bindings)}"
  }
}
