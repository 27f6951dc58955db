# Plan tests without a fleet: the provider is mocked (`mock_provider`, OpenTofu >= 1.8, Terraform
# >= 1.7), so these runs check the module's own wiring (what each input becomes on the
# gradual_module_assignment resource) and its validations, in seconds. The provider's schema and
# its own validators still run: the CLI starts the real provider for them, installed as for any
# test (tools/moduletest.sh --mock). What the provider does with a real fleet is
# tests/fleet_addon.tftest.hcl.

mock_provider "gradual" {}

variables {
  name      = "addon"
  namespace = "fleet"
  modules = [
    { name = "namespace", version = "1.0.0", manifests = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: addon\n" },
    { name = "settings", version = "1.0.0", depends_on = ["namespace"], manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: addon\n" },
  ]
}

# By label: the selector, the modules and the pacing reach the assignment as given; what is left
# empty stays unset, so the provider's defaults apply.
run "selector_wiring" {
  command = plan

  variables {
    selector_labels      = { env = "prod" }
    selector_expressions = [{ key = "region", operator = "In", values = ["eu"] }]
    mode                 = "ApplyOnce"
    update_limit         = "50%"
    max_failures         = "1"
    deletion_policy      = "orphan"
    verify_timeout       = "2m"
    bake_time            = "10s"
    maintenance_window   = { schedule = "0 2 * * *", duration = "4h" }
    ignore_fields        = [{ kind = "Deployment", paths = [".spec.replicas"] }]
    sensitive_paths      = [{ kind = "ConfigMap", paths = [".data.password"] }]
  }

  assert {
    condition     = gradual_module_assignment.this.names == null && gradual_module_assignment.this.selector.match_labels == tomap({ env = "prod" }) && gradual_module_assignment.this.selector.match_expressions[0].values == tolist(["eu"])
    error_message = "selector not passed: ${jsonencode(gradual_module_assignment.this.selector)}, names ${jsonencode(gradual_module_assignment.this.names)}"
  }
  assert {
    condition     = length(gradual_module_assignment.this.modules) == 2 && gradual_module_assignment.this.modules[0].depends_on == null && gradual_module_assignment.this.modules[1].depends_on == tolist(["namespace"])
    error_message = "modules not passed (an empty depends_on must stay unset): ${jsonencode([for m in gradual_module_assignment.this.modules : m.depends_on])}"
  }
  assert {
    condition = (gradual_module_assignment.this.mode == "ApplyOnce" && gradual_module_assignment.this.update_limit == "50%" &&
    gradual_module_assignment.this.max_failures == "1" && gradual_module_assignment.this.deletion_policy == "orphan")
    error_message = "mode, update_limit, max_failures or deletion_policy not passed"
  }
  assert {
    condition     = gradual_module_assignment.this.verify.timeout == "2m" && gradual_module_assignment.this.verify.bake_time == "10s"
    error_message = "verify not passed: ${jsonencode(gradual_module_assignment.this.verify)}"
  }
  assert {
    condition     = gradual_module_assignment.this.maintenance_window.schedule == "0 2 * * *" && gradual_module_assignment.this.ignore_fields[0].paths == tolist([".spec.replicas"])
    error_message = "maintenance_window or ignore_fields not passed"
  }
  assert {
    condition     = gradual_module_assignment.this.sensitive_paths[0].paths == tolist([".data.password"])
    error_message = "sensitive_paths not passed: ${jsonencode(gradual_module_assignment.this.sensitive_paths)}"
  }
  assert {
    condition     = gradual_module_assignment.this.canary == null && gradual_module_assignment.this.on_failure == "halt" && !gradual_module_assignment.this.force_conflicts && gradual_module_assignment.this.adopt
    error_message = "the defaults (no canary, halt, no force, adopt) did not reach the assignment"
  }
}

# By name: names and no selector; the canary and the failure and conflict settings as given.
run "names_wiring" {
  command = plan

  variables {
    names           = ["prod-eu-1", "staging-eu-1"]
    canary          = ["staging-eu-1"]
    canary_optional = true
    on_failure      = "rollback"
    retry_invalid   = true
    force_conflicts = true
    adopt           = false
  }

  assert {
    condition     = gradual_module_assignment.this.selector == null && gradual_module_assignment.this.names == tolist(["prod-eu-1", "staging-eu-1"])
    error_message = "want names and no selector, got names ${jsonencode(gradual_module_assignment.this.names)}, selector ${jsonencode(gradual_module_assignment.this.selector)}"
  }
  assert {
    condition     = gradual_module_assignment.this.canary == tolist(["staging-eu-1"]) && gradual_module_assignment.this.canary_optional && gradual_module_assignment.this.on_failure == "rollback"
    error_message = "canary, canary_optional or on_failure not passed"
  }
  assert {
    condition     = gradual_module_assignment.this.retry_invalid && gradual_module_assignment.this.force_conflicts && !gradual_module_assignment.this.adopt
    error_message = "retry_invalid, force_conflicts or adopt not passed"
  }
}

# `clusters`, the former name of `names`, still works; both at once are refused.
run "clusters_still_accepted" {
  command = plan

  variables {
    clusters = ["prod-eu-1"]
  }

  assert {
    condition     = gradual_module_assignment.this.names == tolist(["prod-eu-1"]) && gradual_module_assignment.this.selector == null
    error_message = "clusters not passed as names: ${jsonencode(gradual_module_assignment.this.names)}"
  }
}

run "rejects_names_and_clusters" {
  command = plan

  variables {
    names    = ["prod-eu-1"]
    clusters = ["prod-us-1"]
  }

  expect_failures = [gradual_module_assignment.this]
}

# values, preview, max_unsettled and the health gates reach the assignment as given.
run "values_and_gates_wiring" {
  command = plan

  variables {
    selector_labels = { env = "prod" }
    values = {
      from_labels = { region = "topology.kubernetes.io/region" }
      selected    = [{ match_labels = { tier = "edge" }, values = { interval = "30s" } }]
      clusters    = { "prod-us-1" = { interval = "10s" } }
    }
    preview       = "none"
    max_unsettled = "10%"
    health_checks = [{
      api_version = "apps/v1"
      kind        = "Deployment"
      current     = "status.?readyReplicas.orValue(0) > 0"
      failed      = "false"
    }]
    cluster_gates = false
    check_job = {
      manifest = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  namespace: addon\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: smoke\n          image: busybox\n"
    }
  }

  assert {
    condition     = gradual_module_assignment.this.values.from_labels == tomap({ region = "topology.kubernetes.io/region" }) && gradual_module_assignment.this.values.clusters["prod-us-1"]["interval"] == "10s" && gradual_module_assignment.this.values.selected[0].match_labels == tomap({ tier = "edge" })
    error_message = "values not passed: ${jsonencode(gradual_module_assignment.this.values)}"
  }
  assert {
    condition     = gradual_module_assignment.this.preview == "none" && gradual_module_assignment.this.max_unsettled == "10%"
    error_message = "preview or max_unsettled not passed"
  }
  assert {
    condition     = gradual_module_assignment.this.verify.health_checks[0].failed == "false" && !gradual_module_assignment.this.verify.cluster_gates && strcontains(gradual_module_assignment.this.verify.check_job.manifest, "name: smoke")
    error_message = "health_checks, cluster_gates or check_job not passed: ${jsonencode(gradual_module_assignment.this.verify)}"
  }
}

run "rejects_bad_preview" {
  command = plan

  variables {
    preview = "canaries"
  }

  expect_failures = [var.preview]
}

# Bad input is refused at plan time, before any call to a cluster.
run "rejects_bad_update_limit" {
  command = plan

  variables {
    name         = "addon"
    update_limit = "0%"
    modules      = [{ name = "settings", version = "1", manifests = "kind: ConfigMap" }]
  }

  expect_failures = [var.update_limit]
}

run "rejects_unknown_dependency" {
  command = plan

  variables {
    name    = "addon"
    modules = [{ name = "settings", version = "1", manifests = "kind: ConfigMap", depends_on = ["nope"] }]
  }

  expect_failures = [var.modules]
}

run "rejects_bad_mode" {
  command = plan

  variables {
    name    = "addon"
    mode    = "Sometimes"
    modules = [{ name = "settings", version = "1", manifests = "kind: ConfigMap" }]
  }

  expect_failures = [var.mode]
}

run "rejects_duplicate_module_names" {
  command = plan

  variables {
    modules = [
      { name = "settings", version = "1", manifests = "kind: ConfigMap" },
      { name = "settings", version = "2", manifests = "kind: ConfigMap" },
    ]
  }

  expect_failures = [var.modules]
}

run "rejects_bad_name" {
  command = plan

  variables {
    name = "Addon_1"
  }

  expect_failures = [var.name]
}

run "rejects_empty_cluster_name" {
  command = plan

  variables {
    names = ["prod-eu-1", " "]
  }

  expect_failures = [var.names]
}

run "rejects_bad_on_failure" {
  command = plan

  variables {
    on_failure = "ignore"
  }

  expect_failures = [var.on_failure]
}

run "rejects_duplicate_canary" {
  command = plan

  variables {
    canary = ["prod-eu-1", "prod-eu-1"]
  }

  expect_failures = [var.canary]
}

# A module's Secrets through the ephemeral `sensitive_manifests` input (every variable of the
# module under test is a root variable here, so the value is ephemeral), or, as before, in
# `modules` itself. Both go to the module's write-only `sensitive_manifests`, which no plan holds.
run "sensitive_manifests_wiring" {
  command = plan

  variables {
    modules = [
      { name = "namespace", version = "1.0.0", manifests = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: addon\n" },
      { name = "settings", version = "1.0.0", depends_on = ["namespace"], manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: addon\n" },
      { name = "legacy", version = "1.0.0", manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: addon\n", sensitive_manifests = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: legacy-token\n  namespace: addon\nstringData:\n  token: old\n" },
    ]
    sensitive_manifests = {
      settings = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: settings-token\n  namespace: addon\nstringData:\n  token: s3cret\n"
    }
  }

  assert {
    condition     = length(gradual_module_assignment.this.modules) == 3 && gradual_module_assignment.this.modules[1].name == "settings"
    error_message = "modules not passed with sensitive_manifests"
  }
}

run "rejects_sensitive_manifests_of_unknown_module" {
  command = plan

  variables {
    sensitive_manifests = {
      nosuch = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\n  namespace: addon\n"
    }
  }

  expect_failures = [gradual_module_assignment.this]
}

run "rejects_sensitive_manifests_twice" {
  command = plan

  variables {
    modules = [
      { name = "settings", version = "1.0.0", manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: addon\n", sensitive_manifests = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n  namespace: addon\n" },
    ]
    sensitive_manifests = {
      settings = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n  namespace: addon\n"
    }
  }

  expect_failures = [gradual_module_assignment.this]
}

# Delivery through Flux: the settings reach the assignment's `delivery.flux`. The registry
# password (ephemeral, like every input of the module under test here) goes to the write-only
# `password`: a real plan never holds it, and the mocks differ on what they show (Terraform's
# null, OpenTofu's the value), so no assertion reads it.
run "flux_wiring" {
  command = plan

  variables {
    selector_labels = { env = "prod" }
    delivery = {
      flux = {
        repository      = "oci://registry.example.com/fleet/addons"
        secret_ref      = "registry-pull"
        cert_secret_ref = "registry-ca"
        username        = "gradual"
      }
    }
    registry_password = "s3cret"
  }

  assert {
    condition     = gradual_module_assignment.this.delivery.flux.repository == "oci://registry.example.com/fleet/addons" && gradual_module_assignment.this.delivery.flux.username == "gradual"
    error_message = "delivery.flux.repository or username not passed"
  }
  assert {
    condition     = gradual_module_assignment.this.delivery.flux.secret_ref == "registry-pull" && gradual_module_assignment.this.delivery.flux.cert_secret_ref == "registry-ca"
    error_message = "delivery.flux.secret_ref or cert_secret_ref not passed"
  }
  assert {
    condition     = gradual_module_assignment.this.delivery.flux.insecure == null && gradual_module_assignment.this.delivery.flux.ca_bundle == null && gradual_module_assignment.this.delivery.flux.client_certificate == null
    error_message = "delivery.flux settings left out did not stay unset"
  }
}

# A token instead of a username and password, over plain HTTP.
run "flux_token_wiring" {
  command = plan

  variables {
    names          = ["prod-eu-1"]
    delivery       = { flux = { repository = "oci://registry.local:5000/addons", insecure = true } }
    registry_token = "t0ken"
  }

  assert {
    condition     = gradual_module_assignment.this.delivery.flux.repository == "oci://registry.local:5000/addons" && gradual_module_assignment.this.delivery.flux.insecure && gradual_module_assignment.this.delivery.flux.username == null
    error_message = "delivery.flux.repository or insecure not passed, or a username set"
  }
}

run "direct_by_default" {
  command = plan

  assert {
    condition     = gradual_module_assignment.this.delivery == null
    error_message = "delivery must stay unset by default (direct delivery)"
  }
}

# Registry credentials without delivery would be dropped silently: refused, naming them.
run "rejects_registry_secret_without_delivery" {
  command = plan

  variables {
    registry_token = "t0ken"
  }

  expect_failures = [gradual_module_assignment.this]
}

# A credential in `delivery` (as the resource takes it) would be kept in the plan: refused,
# pointing to the ephemeral inputs.
run "rejects_credentials_in_delivery" {
  command = plan

  variables {
    delivery = { flux = { repository = "oci://registry.example.com/fleet/addons", token = "t0ken" } }
  }

  expect_failures = [var.delivery]
}

run "rejects_bad_repository" {
  command = plan

  variables {
    delivery = { flux = { repository = "https://registry.example.com/fleet/addons" } }
  }

  expect_failures = [var.delivery]
}

run "rejects_delivery_without_flux" {
  command = plan

  variables {
    delivery = { flux = null }
  }

  expect_failures = [var.delivery]
}
