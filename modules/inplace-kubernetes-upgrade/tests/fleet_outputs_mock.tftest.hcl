# A plan test without a fleet, like plan_mock.tftest.hcl (read its header): the fleet form's
# outputs. A file of its own, so that the apply (to the mock) is a create, the only apply that
# takes the override values.

mock_provider "gradual" {}

variables {
  namespace          = "fleet"
  kubernetes_version = "v1.36.3"
  # The ephemeral inputs are set to their "none" (terraform test before the fix of
  # hashicorp/terraform#38974 refuses to apply when an optional ephemeral input is left unset).
  bootstrap_config_spec_patch = {}
}

# The fleet outputs pass the resource's waves, summary and attention through; the per-machine
# outputs are empty. (The provider leaves `plan` null in the fleet form; a mock cannot set a
# nested list to null on Terraform 1.11, so this run has the mock's empty list; the null case is
# the module's `local.machine_plan`, run on the real provider by the fleet's tests.)
run "fleet_outputs" {
  variables {
    selector_labels      = { env = "prod" }
    update_control_plane = true
  }

  override_resource {
    target = gradual_inplace_update.this
    values = {
      waves     = "3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster"
      summary   = { clusters = 4, skipped = 1, current = 0, changing = 3, in_place = 6, rolling = 0, unchanged = 0 }
      attention = { "prod-ap-1" = "skipped: paused" }
    }
  }

  assert {
    condition     = output.waves == "3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster"
    error_message = "waves output ${jsonencode(output.waves)}"
  }
  assert {
    condition     = output.summary["changing"] == 3 && output.summary["skipped"] == 1 && output.attention == tomap({ "prod-ap-1" = "skipped: paused" })
    error_message = "summary ${jsonencode(output.summary)}, attention ${jsonencode(output.attention)}"
  }
  assert {
    condition     = length(output.plan) == 0 && length(output.machines) == 0 && length(output.in_place_machines) == 0 && length(output.replaced_machines) == 0
    error_message = "the per-machine outputs of the fleet form must be empty: ${jsonencode(output.machines)}"
  }
}
