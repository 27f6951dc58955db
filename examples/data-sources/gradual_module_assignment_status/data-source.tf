# Every cluster of a module assignment with its bindings (like ClusterResourceSetBindings), read
# after the assignment's apply.
data "gradual_module_assignment_status" "cni" {
  namespace  = gradual_module_assignment.cni.namespace
  name       = gradual_module_assignment.cni.name
  depends_on = [gradual_module_assignment.cni]
}

output "cni_bindings" {
  value = { for c in data.gradual_module_assignment_status.cni.clusters : c.name => [for b in c.bindings : "${b.module}@${b.revision} (${b.result})"] }
}

# Fail the run (as a check, after apply) when a module failed or drifted anywhere.
check "cni_healthy" {
  assert {
    condition     = alltrue([for c in data.gradual_module_assignment_status.cni.clusters : !contains(["failed", "drifted", "blocked"], c.state)])
    error_message = "needs attention: ${join("; ", [for c in data.gradual_module_assignment_status.cni.clusters : "${c.name}: ${c.detail}" if contains(["failed", "drifted", "blocked"], c.state)])}"
  }
}
