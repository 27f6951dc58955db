# Plan tests without a fleet: the provider is mocked (`mock_provider`, OpenTofu >= 1.8, Terraform
# >= 1.7), so these runs check the module's own wiring (what each input becomes on the
# gradual_inplace_update resource, what the outputs make of its attributes) and its validations,
# in seconds. The provider's schema and its own validators still run: the CLI starts the real
# provider for them, installed as for any test (tools/moduletest.sh --mock). What the provider
# does with a real fleet is tests/inplace_kubernetes_upgrade.tftest.hcl.

mock_provider "gradual" {}

variables {
  namespace          = "fleet"
  kubernetes_version = "v1.36.3"
}

# The one-cluster form: its MachineDeployment by name, nothing of the fleet form set; a number
# for update_limit is taken as the string the provider wants.
run "one_cluster_wiring" {
  command = plan

  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    update_limit       = 2
    verify_timeout     = "90s"
    machine_spec_patch = { readinessGates = [] }
    # Ephemeral (every input of the module under test is a root variable here), to the write-only
    # attribute: the provider's validators read it, no plan holds it, so no assertion reads it.
    bootstrap_config_spec_patch = { ntp = { servers = ["time.example.com"] } }
  }

  assert {
    condition     = gradual_inplace_update.this.cluster == "prod-eu-1" && gradual_inplace_update.this.machine_deployment == "md-0"
    error_message = "cluster/machine_deployment not passed: ${jsonencode([gradual_inplace_update.this.cluster, gradual_inplace_update.this.machine_deployment])}"
  }
  assert {
    condition = (gradual_inplace_update.this.names == null && gradual_inplace_update.this.selector == null &&
      gradual_inplace_update.this.machine_deployment_selector == null && gradual_inplace_update.this.update_control_plane == null &&
    gradual_inplace_update.this.canary == null)
    error_message = "the one-cluster form set an attribute of the fleet form"
  }
  assert {
    condition     = gradual_inplace_update.this.update_limit == "2" && gradual_inplace_update.this.max_failures == "0" && gradual_inplace_update.this.fallback == "none"
    error_message = "update_limit ${gradual_inplace_update.this.update_limit}, max_failures ${gradual_inplace_update.this.max_failures}, fallback ${gradual_inplace_update.this.fallback}; want 2, 0, none"
  }
  assert {
    condition     = gradual_inplace_update.this.version == "v1.36.3" && gradual_inplace_update.this.verify.timeout == "90s"
    error_message = "version or verify.timeout not passed"
  }
  assert {
    condition     = jsondecode(gradual_inplace_update.this.machine_spec_patch) == { readinessGates = [] } && gradual_inplace_update.this.infrastructure_machine_spec_patch == null
    error_message = "machine_spec_patch is not the JSON of the object given: ${gradual_inplace_update.this.machine_spec_patch}"
  }
  assert {
    condition     = gradual_inplace_update.this.extensions == null
    error_message = "no extensions given must leave the ExtensionConfig objects to the provider (extensions null)"
  }
}

# The fleet form by label: the cluster selector, the owners in each cluster, the canary and the
# pacing reach the resource as given.
run "fleet_by_selector_wiring" {
  command = plan

  variables {
    selector_labels             = { env = "prod" }
    selector_expressions        = [{ key = "region", operator = "In", values = ["eu", "us"] }]
    machine_deployment_selector = { match_labels = { pool = "workers" } }
    update_control_plane        = true
    canary                      = ["prod-eu-1"]
    update_limit                = "25%"
    max_failures                = "1"
    fallback                    = "rolling"
    extensions                  = [{ name = "updater", url = "https://updater.example.com:9443" }]
  }

  assert {
    condition     = gradual_inplace_update.this.cluster == null && gradual_inplace_update.this.machine_deployment == null && gradual_inplace_update.this.names == null
    error_message = "the fleet form by selector set cluster, machine_deployment or names"
  }
  assert {
    condition     = gradual_inplace_update.this.selector.match_labels == tomap({ env = "prod" }) && length(gradual_inplace_update.this.selector.match_expressions) == 1 && gradual_inplace_update.this.selector.match_expressions[0].values == tolist(["eu", "us"])
    error_message = "selector not passed: ${jsonencode(gradual_inplace_update.this.selector)}"
  }
  assert {
    condition     = gradual_inplace_update.this.machine_deployment_selector.match_labels == tomap({ pool = "workers" }) && gradual_inplace_update.this.update_control_plane == true
    error_message = "owners not passed: ${jsonencode(gradual_inplace_update.this.machine_deployment_selector)}, update_control_plane ${jsonencode(gradual_inplace_update.this.update_control_plane)}"
  }
  assert {
    condition     = gradual_inplace_update.this.canary == tolist(["prod-eu-1"]) && gradual_inplace_update.this.update_limit == "25%" && gradual_inplace_update.this.max_failures == "1" && gradual_inplace_update.this.fallback == "rolling"
    error_message = "pacing not passed: canary ${jsonencode(gradual_inplace_update.this.canary)}, update_limit ${gradual_inplace_update.this.update_limit}, max_failures ${gradual_inplace_update.this.max_failures}"
  }
  assert {
    condition     = length(gradual_inplace_update.this.extensions) == 1 && gradual_inplace_update.this.extensions[0].name == "updater"
    error_message = "extensions not passed"
  }
}

# The fleet form by name, every MachineDeployment of each cluster ({}), no control plane.
run "fleet_by_names_wiring" {
  command = plan

  variables {
    names                       = ["prod-eu-1", "prod-us-1"]
    machine_deployment_selector = {}
  }

  assert {
    condition     = gradual_inplace_update.this.names == tolist(["prod-eu-1", "prod-us-1"]) && gradual_inplace_update.this.selector == null && gradual_inplace_update.this.cluster == null
    error_message = "names not passed alone: names ${jsonencode(gradual_inplace_update.this.names)}, selector ${jsonencode(gradual_inplace_update.this.selector)}"
  }
  assert {
    condition     = gradual_inplace_update.this.machine_deployment_selector != null && gradual_inplace_update.this.machine_deployment_selector.match_labels == null && gradual_inplace_update.this.update_control_plane == null
    error_message = "want every MachineDeployment ({}) and no control plane: ${jsonencode(gradual_inplace_update.this.machine_deployment_selector)}, ${jsonencode(gradual_inplace_update.this.update_control_plane)}"
  }
}

# ClusterClass-built clusters: each topology variable reaches the resource JSON-encoded, by name.
run "topology_variables_wiring" {
  command = plan

  variables {
    selector_labels      = { env = "prod" }
    update_control_plane = true
    topology_variables   = { workerNote = "v2", replicas = 3, labels = { tier = "edge" } }
  }

  assert {
    condition     = gradual_inplace_update.this.topology_variables == tomap({ workerNote = jsonencode("v2"), replicas = jsonencode(3), labels = jsonencode({ tier = "edge" }) })
    error_message = "topology_variables not passed JSON-encoded: ${jsonencode(gradual_inplace_update.this.topology_variables)}"
  }
}

run "rejects_topology_variables_not_a_map" {
  command = plan

  variables {
    selector_labels      = { env = "prod" }
    update_control_plane = true
    topology_variables   = "workerNote=v2"
  }

  expect_failures = [var.topology_variables]
}

# Bad input is refused at plan time, naming the input, before the provider is asked anything.

run "rejects_no_form" {
  command         = plan
  expect_failures = [var.cluster]
}

run "rejects_two_forms" {
  command = plan

  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    selector_labels    = { env = "prod" }
  }

  expect_failures = [var.cluster]
}

run "rejects_cluster_without_machine_deployment" {
  command = plan

  variables {
    cluster = "prod-eu-1"
  }

  expect_failures = [var.machine_deployment]
}

run "rejects_machine_deployment_in_fleet" {
  command = plan

  variables {
    names                       = ["prod-eu-1"]
    machine_deployment          = "md-0"
    machine_deployment_selector = {}
  }

  expect_failures = [var.machine_deployment]
}

run "rejects_fleet_without_owners" {
  command = plan

  variables {
    selector_labels = { env = "prod" }
  }

  expect_failures = [var.machine_deployment_selector]
}

run "rejects_fleet_inputs_with_one_cluster" {
  command = plan

  variables {
    cluster              = "prod-eu-1"
    machine_deployment   = "md-0"
    update_control_plane = true
  }

  expect_failures = [var.machine_deployment_selector]
}

run "rejects_canary_with_one_cluster" {
  command = plan

  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    canary             = ["prod-eu-1"]
  }

  expect_failures = [var.canary]
}

run "rejects_empty_names" {
  command = plan

  variables {
    names                = []
    update_control_plane = true
  }

  expect_failures = [var.names]
}

# `clusters`, the former name of `names`, still works; both at once are refused.
run "clusters_still_accepted" {
  command = plan

  variables {
    clusters             = ["prod-eu-1"]
    update_control_plane = true
  }

  assert {
    condition     = gradual_inplace_update.this.names == tolist(["prod-eu-1"])
    error_message = "clusters not passed as names: ${jsonencode(gradual_inplace_update.this.names)}"
  }
}

run "rejects_names_and_clusters" {
  command = plan

  variables {
    names                = ["prod-eu-1"]
    clusters             = ["prod-us-1"]
    update_control_plane = true
  }

  expect_failures = [var.names]
}

run "rejects_bad_update_limit" {
  command = plan

  variables {
    names                = ["prod-eu-1"]
    update_control_plane = true
    update_limit         = 0
  }

  expect_failures = [var.update_limit]
}

run "rejects_bad_max_failures" {
  command = plan

  variables {
    names                = ["prod-eu-1"]
    update_control_plane = true
    max_failures         = "101%"
  }

  expect_failures = [var.max_failures]
}

run "rejects_bad_selector_operator" {
  command = plan

  variables {
    selector_expressions = [{ key = "env", operator = "Equals", values = ["prod"] }]
    update_control_plane = true
  }

  expect_failures = [var.selector_expressions]
}

run "rejects_bad_version" {
  command = plan

  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    kubernetes_version = "1.37"
  }

  expect_failures = [var.kubernetes_version]
}

run "rejects_bad_fallback" {
  command = plan

  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    fallback           = "replace"
  }

  expect_failures = [var.fallback]
}

run "rejects_plain_http_extension" {
  command = plan

  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    extensions         = [{ name = "reference", url = "http://127.0.0.1:9443" }]
  }

  expect_failures = [var.extensions]
}
