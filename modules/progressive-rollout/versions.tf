terraform {
  # OpenTofu >= 1.8 and Terraform >= 1.8 both satisfy this (provider functions, tests).
  required_version = ">= 1.8.0"

  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
      # 0.x: minor releases may change the schema; pin the minor you tested with when you use it.
      version = ">= 0.3.0, < 0.4.0"
    }
  }
}
