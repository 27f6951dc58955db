# Plan tests without a fleet: the provider is mocked (`mock_provider`, OpenTofu >= 1.8, Terraform
# >= 1.7), so these runs check the module's own wiring (what each input becomes on the
# gradual_rollout resource) and its validations, in seconds. The provider's schema and its own
# validators still run: the CLI starts the real provider for them, installed as for any test
# (tools/moduletest.sh --mock). What the provider does with a real fleet is
# tests/progressive_rollout.tftest.hcl.

mock_provider "gradual" {}

variables {
  name      = "web"
  namespace = "fleet"
  manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\n  namespace: default\n"
}

# By label: the selector, wave_size as the rollout's update_limit, and verify; what is left empty
# stays unset.
run "selector_wiring" {
  command = plan

  variables {
    selector_labels      = { env = "prod" }
    selector_expressions = [{ key = "region", operator = "NotIn", values = ["ap"] }]
    canary               = ["prod-eu-1"]
    wave_size            = "50%"
    max_failures         = "1"
    on_failure           = "halt"
    bake_time            = "5s"
    verify_timeout       = "2m"
    http_checks          = [{ url = "https://{cluster}.example.com/healthz", expected_status = 200 }]
    default_namespace    = "web"
    deletion_policy      = "orphan"
    adopt                = false
    canary_optional      = true
    stages               = [{ name = "eu", match_labels = { region = "eu" }, max_failures = "0" }, { name = "us", names = ["prod-us-1"] }]
    promote_until        = "eu"
    sensitive_paths      = [{ kind = "ConfigMap", paths = [".data.password"] }]
    sensitive_manifests  = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-token\n  namespace: web\nstringData:\n  token: s3cret\n"
  }

  assert {
    condition     = gradual_rollout.this.names == null && gradual_rollout.this.selector.match_labels == tomap({ env = "prod" }) && gradual_rollout.this.selector.match_expressions[0].operator == "NotIn"
    error_message = "selector not passed: ${jsonencode(gradual_rollout.this.selector)}"
  }
  assert {
    condition = (gradual_rollout.this.canary == tolist(["prod-eu-1"]) && gradual_rollout.this.update_limit == "50%" &&
    gradual_rollout.this.max_failures == "1" && gradual_rollout.this.on_failure == "halt")
    error_message = "canary, wave_size (update_limit), max_failures or on_failure not passed"
  }
  assert {
    condition     = gradual_rollout.this.verify.bake_time == "5s" && gradual_rollout.this.verify.timeout == "2m" && gradual_rollout.this.verify.http_checks[0].url == "https://{cluster}.example.com/healthz"
    error_message = "verify not passed: ${jsonencode(gradual_rollout.this.verify)}"
  }
  assert {
    condition     = gradual_rollout.this.default_namespace == "web" && gradual_rollout.this.deletion_policy == "orphan" && gradual_rollout.this.record_namespace == "gradual-system"
    error_message = "default_namespace, deletion_policy or record_namespace not passed"
  }
  assert {
    condition     = gradual_rollout.this.stages[0].match_labels == tomap({ region = "eu" }) && gradual_rollout.this.stages[1].names == tolist(["prod-us-1"]) && gradual_rollout.this.promote_until == "eu"
    error_message = "stages or promote_until not passed: ${jsonencode(gradual_rollout.this.stages)}"
  }
  assert {
    condition     = !gradual_rollout.this.adopt && gradual_rollout.this.canary_optional && gradual_rollout.this.sensitive_paths[0].paths == tolist([".data.password"])
    error_message = "adopt, canary_optional or sensitive_paths not passed"
  }
  # sensitive_manifests is write-only: never in the plan, so there is nothing to compare; the
  # provider accepting the bundle with it is what this run shows.
}

# By name: names and no selector. Neither names nor labels: no selector (every Cluster of the
# namespace), not an empty one.
run "names_wiring" {
  command = plan

  variables {
    names           = ["prod-eu-1", "prod-us-1"]
    selector_labels = { env = "prod" }
    retry_invalid   = true
    force_conflicts = true
  }

  assert {
    condition     = gradual_rollout.this.names == tolist(["prod-eu-1", "prod-us-1"]) && gradual_rollout.this.selector == null
    error_message = "want names and no selector (names wins): names ${jsonencode(gradual_rollout.this.names)}, selector ${jsonencode(gradual_rollout.this.selector)}"
  }
  assert {
    condition     = gradual_rollout.this.retry_invalid && gradual_rollout.this.force_conflicts && gradual_rollout.this.canary == null
    error_message = "retry_invalid or force_conflicts not passed, or an empty canary set"
  }
  assert {
    condition     = gradual_rollout.this.stages == null && gradual_rollout.this.promote_until == null
    error_message = "no stages by default"
  }
  assert {
    condition     = gradual_rollout.this.adopt && !gradual_rollout.this.canary_optional && gradual_rollout.this.sensitive_paths == null
    error_message = "the defaults (adopt, no canary_optional, no sensitive_paths) did not reach the rollout"
  }
}

run "no_selector_wiring" {
  command = plan

  assert {
    condition     = gradual_rollout.this.selector == null && gradual_rollout.this.names == null && gradual_rollout.this.verify.http_checks == null
    error_message = "want neither selector nor names nor http_checks"
  }
}

# `clusters`, the former name of `names`, still works; both at once are refused.
run "clusters_still_accepted" {
  command = plan

  variables {
    clusters = ["prod-eu-1"]
  }

  assert {
    condition     = gradual_rollout.this.names == tolist(["prod-eu-1"]) && gradual_rollout.this.selector == null
    error_message = "clusters not passed as names: ${jsonencode(gradual_rollout.this.names)}"
  }
}

run "rejects_names_and_clusters" {
  command = plan

  variables {
    names    = ["prod-eu-1"]
    clusters = ["prod-us-1"]
  }

  expect_failures = [gradual_rollout.this]
}

# values, preview, max_unsettled and the health gates reach the rollout as given.
run "values_and_gates_wiring" {
  command = plan

  variables {
    selector_labels = { env = "prod" }
    manifests       = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\n  namespace: default\ndata:\n  region: \"$${region}\"\n"
    values = {
      from_labels = { region = "topology.kubernetes.io/region" }
      selected    = [{ match_labels = { tier = "edge" }, values = { interval = "30s" } }]
      clusters    = { "prod-us-1" = { interval = "10s" } }
    }
    preview       = "all"
    max_unsettled = "1"
    health_checks = [{
      api_version = "apps/v1"
      kind        = "Deployment"
      current     = "status.?readyReplicas.orValue(0) > 0"
    }]
    cluster_gates = false
    check_job = {
      timeout  = "2m"
      manifest = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  namespace: default\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: smoke\n          image: busybox\n"
    }
  }

  assert {
    condition     = gradual_rollout.this.values.from_labels == tomap({ region = "topology.kubernetes.io/region" }) && gradual_rollout.this.values.clusters["prod-us-1"]["interval"] == "10s" && gradual_rollout.this.values.selected[0].values["interval"] == "30s"
    error_message = "values not passed: ${jsonencode(gradual_rollout.this.values)}"
  }
  assert {
    condition     = gradual_rollout.this.preview == "all" && gradual_rollout.this.max_unsettled == "1"
    error_message = "preview or max_unsettled not passed"
  }
  assert {
    condition     = gradual_rollout.this.verify.health_checks[0].kind == "Deployment" && gradual_rollout.this.verify.health_checks[0].current == "status.?readyReplicas.orValue(0) > 0" && !gradual_rollout.this.verify.cluster_gates
    error_message = "health_checks or cluster_gates not passed: ${jsonencode(gradual_rollout.this.verify)}"
  }
  assert {
    condition     = gradual_rollout.this.verify.check_job.timeout == "2m" && strcontains(gradual_rollout.this.verify.check_job.manifest, "name: smoke")
    error_message = "check_job not passed"
  }
}

run "rejects_bad_preview" {
  command = plan

  variables {
    preview = "some"
  }

  expect_failures = [var.preview]
}

# Bad input is refused at plan time, naming the input, before the provider is asked anything.

run "rejects_bad_wave_size" {
  command = plan

  variables {
    wave_size = "25 percent"
  }

  expect_failures = [var.wave_size]
}

run "rejects_zero_wave_size" {
  command = plan

  variables {
    wave_size = "0%"
  }

  expect_failures = [var.wave_size]
}

run "rejects_bad_on_failure" {
  command = plan

  variables {
    on_failure = "ignore"
  }

  expect_failures = [var.on_failure]
}

run "rejects_empty_manifests" {
  command = plan

  variables {
    manifests = "  "
  }

  expect_failures = [var.manifests]
}

run "rejects_duplicate_canary" {
  command = plan

  variables {
    canary = ["prod-eu-1", "prod-eu-1"]
  }

  expect_failures = [var.canary]
}

run "rejects_bad_http_check" {
  command = plan

  variables {
    http_checks = [{ url = "ftp://example.com" }]
  }

  expect_failures = [var.http_checks]
}

run "rejects_bad_max_failures" {
  command = plan

  variables {
    max_failures = "-1"
  }

  expect_failures = [var.max_failures]
}

# Delivery through Flux: the settings reach the rollout's `delivery.flux`. The registry password
# (an ephemeral input, as every variable of the module under test is a root variable here) goes to
# the write-only `password`: a real plan never holds it, and the mocks differ on what they show
# (Terraform's null, OpenTofu's the value), so no assertion reads it.
run "flux_wiring" {
  command = plan

  variables {
    selector_labels = { env = "prod" }
    delivery = {
      flux = {
        repository      = "oci://registry.example.com/fleet/web"
        ca_bundle       = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        secret_ref      = "registry-pull"
        cert_secret_ref = "registry-ca"
        username        = "gradual"
      }
    }
    registry_password = "s3cret"
  }

  assert {
    condition     = gradual_rollout.this.delivery.flux.repository == "oci://registry.example.com/fleet/web" && gradual_rollout.this.delivery.flux.username == "gradual"
    error_message = "delivery.flux.repository or username not passed"
  }
  assert {
    condition = (gradual_rollout.this.delivery.flux.secret_ref == "registry-pull" && gradual_rollout.this.delivery.flux.cert_secret_ref == "registry-ca" &&
    startswith(gradual_rollout.this.delivery.flux.ca_bundle, "-----BEGIN CERTIFICATE-----"))
    error_message = "delivery.flux.secret_ref, cert_secret_ref or ca_bundle not passed"
  }
  assert {
    condition     = gradual_rollout.this.delivery.flux.insecure == null && gradual_rollout.this.delivery.flux.client_certificate == null
    error_message = "delivery.flux settings left out did not stay unset"
  }
}

# A token instead of a username and password, over plain HTTP.
run "flux_token_wiring" {
  command = plan

  variables {
    names          = ["prod-eu-1"]
    delivery       = { flux = { repository = "oci://registry.local:5000/web", insecure = true } }
    registry_token = "t0ken"
  }

  assert {
    condition     = gradual_rollout.this.delivery.flux.repository == "oci://registry.local:5000/web" && gradual_rollout.this.delivery.flux.insecure && gradual_rollout.this.delivery.flux.username == null
    error_message = "delivery.flux.repository or insecure not passed, or a username set"
  }
}

run "direct_by_default" {
  command = plan

  assert {
    condition     = gradual_rollout.this.delivery == null
    error_message = "delivery must stay unset by default (direct delivery)"
  }
}

# Registry credentials without delivery would be dropped silently: refused, naming them.
run "rejects_registry_secret_without_delivery" {
  command = plan

  variables {
    registry_password = "s3cret"
  }

  expect_failures = [gradual_rollout.this]
}

# A credential in `delivery` (as the resource takes it) would be kept in the plan: refused,
# pointing to the ephemeral inputs.
run "rejects_credentials_in_delivery" {
  command = plan

  variables {
    delivery = { flux = { repository = "oci://registry.example.com/fleet/web", username = "gradual", password = "s3cret" } }
  }

  expect_failures = [var.delivery]
}

run "rejects_bad_repository" {
  command = plan

  variables {
    delivery = { flux = { repository = "registry.example.com/fleet/web" } }
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
