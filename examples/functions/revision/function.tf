terraform {
  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
    }
  }
  required_version = ">= 1.8.0"
}

# The revision a rollout of these manifests will carry: the same objects in any order or
# formatting give the same name, so it is known at plan time.
output "ingress_revision" {
  value = provider::gradual::revision(file("${path.module}/ingress.yaml"))
}
