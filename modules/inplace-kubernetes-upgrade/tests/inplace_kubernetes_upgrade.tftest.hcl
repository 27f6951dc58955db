# Runs against a test-bed fleet with a MachineDeployment and the reference update extension, which
# tools/moduletest.sh sets up before it runs this file: the Machines are Cluster API objects that
# no HCL of this provider can write (the provider writes to workload clusters, and only patches
# existing Machines), and the extension is a separate TLS server process
# (go run ./cmd/gradual-update-extension), so both come from the script, which passes them in a
# -var-file:
#
#   run_id             = "abc123"                  # unique per run
#   cluster            = "staging-eu-1"            # a test-bed workload cluster
#   machine_deployment = "mt-abc123-tofu-md"       # 2 Machines on its kwok Nodes, spec.version v1.36.3
#   target_version     = "v1.37.0"
#   extension_url      = "https://127.0.0.1:PORT"
#   extension_ca       = "-----BEGIN CERTIFICATE-----..."
#
# KUBE_CONFIG_PATH is the management cluster's kubeconfig. Every run is a plan: nothing is written;
# the script deletes the Machine objects afterwards.

# The management cluster comes from KUBE_CONFIG_PATH (read by the provider, like hashicorp/kubernetes):
# provider blocks of a test file cannot read TF_VAR_ variables the module does not declare.
provider "gradual" {}

variables {
  namespace          = "fleet"
  cluster            = var.cluster
  machine_deployment = var.machine_deployment
  kubernetes_version = var.target_version
  extensions         = [{ name = "reference", url = var.extension_url, ca_bundle = var.extension_ca }]
  verify_timeout     = "90s"
}

# Bad input (versions, forms, limits, extensions) is refused by the module's validations; those
# runs need no fleet and are in plan_mock.tftest.hcl.

# The plan, before anything changes: both machines in place through the reference extension.
run "plan_in_place" {
  command = plan

  assert {
    condition     = length(output.plan) == 2 && alltrue([for m in output.plan : m.strategy == "in-place" && m.extensions == tolist(["reference"])])
    error_message = "want both machines in place through the reference extension: ${jsonencode(output.plan)}"
  }
  assert {
    condition     = alltrue([for m in output.plan : contains(m.changed_fields, "machine spec.version")])
    error_message = "spec.version is not among the changed fields: ${jsonencode(output.plan)}"
  }
}

# Applying needs the real Cluster API controllers (the change is written to the MachineDeployment
# and Cluster API updates the machines), which this fleet does not run: the provider's acceptance
# tests apply against them (internal/resources/inplaceupdate, tools/testacc.sh). Here the plan.

# A change no extension covers (the infrastructure machine's size): with fallback = "rolling"
# the plan shows both machines replaced by Cluster API instead of failing.
run "rolling_fallback" {
  command = plan

  variables {
    fallback                          = "rolling"
    infrastructure_machine_spec_patch = { size = "large" }
  }

  assert {
    condition     = length(output.replaced_machines) == 2 && alltrue([for m in output.plan : contains(m.uncovered_fields, "infrastructureMachine spec.size")])
    error_message = "want both machines replaced for infrastructureMachine spec.size: ${jsonencode(output.plan)}"
  }
}

# The fleet form over the same MachineDeployment: the cluster by name, its MachineDeployments by
# label. On a create the waves and counts are known after apply (the plan shows them as
# warnings); what is known is the fleet's id and the revision, and the per-machine outputs are
# empty (the resource's `plan` is null in the fleet form).
run "fleet_form_plan" {
  command = plan

  variables {
    cluster                     = null
    machine_deployment          = null
    names                       = [var.cluster]
    machine_deployment_selector = { match_labels = { "cluster.x-k8s.io/deployment-name" = var.machine_deployment } }
    update_limit                = "50%"
  }

  assert {
    condition     = startswith(output.id, "fleet/fleet:") && output.revision != ""
    error_message = "id ${output.id}, revision ${output.revision}: want a fleet id and a revision"
  }
  assert {
    condition     = length(output.plan) == 0 && length(output.machines) == 0 && length(output.in_place_machines) == 0
    error_message = "the fleet form's per-machine outputs must be empty: ${jsonencode(output.machines)}"
  }
}
