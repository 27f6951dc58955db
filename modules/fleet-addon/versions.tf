terraform {
  # OpenTofu >= 1.8 and Terraform >= 1.8 both satisfy this (provider functions, tests).
  required_version = ">= 1.8.0"

  required_providers {
    gradual = {
      source = "gradual-dev/gradual"
    }
  }
}
