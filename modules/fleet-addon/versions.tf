terraform {
  # OpenTofu >= 1.11 and Terraform >= 1.11: the secret inputs are ephemeral variables (Terraform
  # 1.10, OpenTofu 1.11) for write-only attributes (Terraform 1.11, OpenTofu 1.11).
  required_version = ">= 1.11.0"

  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
      # 0.x: minor releases may change the schema; pin the minor you tested with when you use it.
      version = ">= 0.3.0, < 0.4.0"
    }
  }
}
