# A plan test without a fleet, like plan_mock.tftest.hcl (read its header): the one-cluster form's
# per-machine outputs, from the resource's `plan` (a list of nested attributes) and `status`.
# OpenTofu only (a .tofutest.hcl file, which Terraform does not read): Terraform (1.11 at least)
# refuses override values for a list of nested attributes ("expected object type, found tuple").
# A file of its own, so that the apply (to the mock) is a create, the only apply that takes the
# override values.

mock_provider "gradual" {}

variables {
  namespace          = "fleet"
  kubernetes_version = "v1.36.3"
}

# The per-machine outputs of the one-cluster form combine the resource's plan and status.
run "one_cluster_outputs" {
  variables {
    cluster            = "prod-eu-1"
    machine_deployment = "md-0"
    fallback           = "rolling"
  }

  override_resource {
    target = gradual_inplace_update.this
    values = {
      plan = [
        { name = "md-0-a", node = "node-a", strategy = "in-place", changed_fields = ["machine spec.version"], extensions = ["updater"], coverage = [], uncovered_fields = [], notes = [] },
        { name = "md-0-b", node = "node-b", strategy = "rolling", changed_fields = ["machine spec.version"], extensions = [], coverage = [], uncovered_fields = ["infrastructureMachine spec.size"], notes = [] },
      ]
      status = { "md-0-a" = "updated", "md-0-b" = "replaced" }
    }
  }

  assert {
    condition     = output.in_place_machines == ["md-0-a"] && output.replaced_machines == ["md-0-b"]
    error_message = "in place ${jsonencode(output.in_place_machines)}, replaced ${jsonencode(output.replaced_machines)}"
  }
  assert {
    condition     = output.machines["md-0-a"].status == "updated" && output.machines["md-0-b"].status == "replaced" && output.machines["md-0-b"].uncovered_fields == tolist(["infrastructureMachine spec.size"])
    error_message = "machines ${jsonencode(output.machines)}"
  }
}
