variable "namespace" {
  description = "Namespace of the Cluster API objects (Cluster, MachineDeployment, Machines) in the management cluster."
  type        = string
  nullable    = false

  validation {
    condition     = length(trimspace(var.namespace)) > 0
    error_message = "namespace must not be empty."
  }
}

variable "cluster" {
  description = "Name of the Cluster API `Cluster` whose machines are updated."
  type        = string
  nullable    = false

  validation {
    condition     = length(trimspace(var.cluster)) > 0
    error_message = "cluster must not be empty."
  }
}

variable "machine_deployment" {
  description = "Name of the MachineDeployment whose Machines are updated."
  type        = string
  nullable    = false

  validation {
    condition     = length(trimspace(var.machine_deployment)) > 0
    error_message = "machine_deployment must not be empty."
  }
}

variable "kubernetes_version" {
  description = "Kubernetes version the Machines (`spec.version`) and their Nodes' kubelets should run, e.g. `v1.36.3`."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^v[0-9]+\\.[0-9]+\\.[0-9]+([-+][0-9A-Za-z.+-]+)?$", var.kubernetes_version))
    error_message = "kubernetes_version must be a Kubernetes version with a leading v, such as \"v1.36.3\"."
  }
}

variable "fallback" {
  description = "What happens to a machine whose change no extension covers: `none` fails the plan naming the machine and the uncovered fields; `rolling` lets Cluster API replace it."
  type        = string
  default     = "none"
  nullable    = false

  validation {
    condition     = contains(["none", "rolling"], var.fallback)
    error_message = "fallback must be \"none\" (fail the plan) or \"rolling\" (replace the machine the Cluster API way)."
  }
}

variable "extensions" {
  description = "Update extensions to ask, explicitly: `name`, `url` (`https://host[:port][/path]`), optional `ca_bundle` (PEM, not secret) and `timeout` (up to 30s). Empty: the extensions registered as `ExtensionConfig` objects in the management cluster."
  type = list(object({
    name      = string
    url       = string
    ca_bundle = optional(string)
    timeout   = optional(string)
  }))
  default  = []
  nullable = false

  validation {
    condition     = alltrue([for e in var.extensions : length(trimspace(e.name)) > 0])
    error_message = "Every extension needs a non-empty name."
  }
  validation {
    condition     = alltrue([for e in var.extensions : startswith(e.url, "https://")])
    error_message = "Extension URLs must use https:// (plain HTTP is refused)."
  }
  validation {
    condition     = length(distinct([for e in var.extensions : e.name])) == length(var.extensions)
    error_message = "Extension names must be unique."
  }
}

variable "update_limit" {
  description = "Ignored (kept for existing callers): Cluster API paces the machines by the MachineDeployment's rollout strategy (maxUnavailable)."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = var.update_limit >= 1 && floor(var.update_limit) == var.update_limit
    error_message = "update_limit must be a whole number >= 1."
  }
}

variable "verify_timeout" {
  description = "Longest wait for every machine to be up to date and its Node Ready on `kubernetes_version`, as a duration."
  type        = string
  default     = "10m"
  nullable    = false

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", var.verify_timeout))
    error_message = "verify_timeout must be a duration such as \"90s\" or \"10m\"."
  }
}

variable "machine_spec_patch" {
  description = "Optional JSON merge patch (as an HCL object) of the Machine `spec`, applied together with the version."
  type        = any
  default     = null
}

variable "bootstrap_config_spec_patch" {
  description = "Optional JSON merge patch (as an HCL object) of the bootstrap config `spec`, e.g. `{ ntp = { servers = [\"time.example.com\"] } }`."
  type        = any
  default     = null
}

variable "infrastructure_machine_spec_patch" {
  description = "Optional JSON merge patch (as an HCL object) of the infrastructure machine `spec`. Few extensions cover these fields; see `fallback`."
  type        = any
  default     = null
}

variable "timeouts" {
  description = "Operation timeouts (`create`, `update`) as durations; unset uses the provider's defaults."
  type = object({
    create = optional(string)
    update = optional(string)
  })
  default = null
}
