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
  description = "One-cluster form: name of the Cluster API `Cluster` whose MachineDeployment `machine_deployment` is updated. Null for the fleet form (`clusters` or `selector_labels`/`selector_expressions`)."
  type        = string
  default     = null

  validation {
    condition     = var.cluster == null || try(length(trimspace(var.cluster)) > 0, false)
    error_message = "cluster must not be empty: leave it null for the fleet form."
  }
  validation {
    condition     = (var.cluster != null ? 1 : 0) + (var.names != null || var.clusters != null ? 1 : 0) + (length(var.selector_labels) + length(var.selector_expressions) > 0 ? 1 : 0) == 1
    error_message = "Pick the clusters one way: `cluster` (with `machine_deployment`) for one MachineDeployment of one cluster, or, for a fleet, either `names` or `selector_labels`/`selector_expressions` (with `machine_deployment_selector` and/or `update_control_plane`). Exactly one of `cluster`, `names` (or its former name `clusters`) and a selector must be set."
  }
}

variable "machine_deployment" {
  description = "One-cluster form: name of the MachineDeployment of `cluster` whose Machines are updated. The fleet form picks MachineDeployments by label instead (`machine_deployment_selector`): their names differ from cluster to cluster."
  type        = string
  default     = null

  validation {
    condition     = var.machine_deployment == null || try(length(trimspace(var.machine_deployment)) > 0, false)
    error_message = "machine_deployment must not be empty."
  }
  validation {
    condition     = (var.cluster == null) == (var.machine_deployment == null)
    error_message = "machine_deployment goes with cluster (the one-cluster form) and only with it: set both, or neither and pick the fleet's MachineDeployments with machine_deployment_selector."
  }
}

variable "names" {
  description = "Fleet form: names of the Cluster API `Cluster`s to update, in `namespace`. Null (the default): not this form. An empty list is an error, not \"every Cluster\"."
  type        = list(string)
  default     = null

  validation {
    condition     = var.names == null || try(length(var.names) > 0 && alltrue([for c in var.names : length(trimspace(c)) > 0]), false)
    error_message = "names must name at least one cluster and no empty name: leave it null to pick by cluster or selector."
  }
  validation {
    condition     = var.names == null || var.clusters == null
    error_message = "Set names or its former name clusters, not both."
  }
}

variable "clusters" {
  description = "Deprecated: the former name of `names`, still accepted. Set one of the two."
  type        = list(string)
  default     = null

  validation {
    condition     = var.clusters == null || try(length(var.clusters) > 0 && alltrue([for c in var.clusters : length(trimspace(c)) > 0]), false)
    error_message = "clusters must name at least one cluster and no empty name: leave it null to pick by cluster or selector."
  }
}

variable "selector_labels" {
  description = "Fleet form: labels a `Cluster` must carry to be updated (ANDed with `selector_expressions`). Clusters that are paused, being deleted, not initialized or without a usable kubeconfig Secret are skipped with the reason."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "selector_expressions" {
  description = "Fleet form: label requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`) on the `Cluster`s, ANDed with `selector_labels`."
  type = list(object({
    key      = string
    operator = string
    values   = optional(list(string))
  }))
  default  = []
  nullable = false

  validation {
    condition     = alltrue([for e in var.selector_expressions : contains(["In", "NotIn", "Exists", "DoesNotExist"], e.operator)])
    error_message = "selector_expressions: operator must be one of In, NotIn, Exists, DoesNotExist."
  }
}

variable "machine_deployment_selector" {
  description = "Fleet form: the MachineDeployments to update in each cluster, by label (`match_labels`, `match_expressions`; `{}` picks all of a cluster's MachineDeployments). Null: none (then `update_control_plane` must be true)."
  type = object({
    match_labels = optional(map(string))
    match_expressions = optional(list(object({
      key      = string
      operator = string
      values   = optional(list(string))
    })))
  })
  default = null

  validation {
    condition     = var.machine_deployment_selector == null || alltrue([for e in coalesce(try(var.machine_deployment_selector.match_expressions, null), []) : contains(["In", "NotIn", "Exists", "DoesNotExist"], e.operator)])
    error_message = "machine_deployment_selector: operator must be one of In, NotIn, Exists, DoesNotExist."
  }
  validation {
    condition     = var.cluster != null ? var.machine_deployment_selector == null && !var.update_control_plane : var.machine_deployment_selector != null || var.update_control_plane
    error_message = "The fleet form picks what to update in each cluster with machine_deployment_selector ({} for all MachineDeployments) and/or update_control_plane = true; the one-cluster form (cluster) takes machine_deployment and neither of these."
  }
}

variable "update_control_plane" {
  description = "Fleet form: update each cluster's control plane too (the KubeadmControlPlane its `spec.controlPlaneRef` names), before its MachineDeployments, as Kubernetes' version skew policy wants."
  type        = bool
  default     = false
  nullable    = false
}

variable "canary" {
  description = "Fleet form: clusters updated first, in this order, in waves of their own (at most `update_limit` at a time). A canary that cannot go first fails the plan. Empty: no canary."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for c in var.canary : length(trimspace(c)) > 0]) && length(distinct(var.canary)) == length(var.canary)
    error_message = "canary must not contain empty names or name a cluster twice."
  }
  validation {
    condition     = length(var.canary) == 0 || var.cluster == null
    error_message = "canary is for the fleet form (clusters or a selector): with one cluster there is nothing to go first."
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
  description = "Most clusters updated at once (the fleet form's waves): a whole number >= 1 (\"2\") or a percentage of the eligible clusters from 1% to 100% (\"25%\"), rounded up. Within a cluster Cluster API paces the machines of each owner by its rollout strategy (maxSurge/maxUnavailable). The one-cluster form is one wave of one cluster whatever the limit. A number (`2`) is taken as the string \"2\"."
  type        = string
  default     = "1"
  nullable    = false

  validation {
    condition     = can(regex("^[1-9][0-9]*$", var.update_limit)) || (can(regex("^[0-9]{1,3}%$", var.update_limit)) && try(tonumber(trimsuffix(var.update_limit, "%")) >= 1 && tonumber(trimsuffix(var.update_limit, "%")) <= 100, false))
    error_message = "update_limit must be a whole number >= 1 (e.g. \"2\") or a percentage from 1% to 100% (e.g. \"25%\")."
  }
}

variable "max_failures" {
  description = "Fleet form: clusters that may fail (not up to date within `verify_timeout`, or the change refused) before no new wave starts: a whole number >= 0 or a percentage from 0% to 100%. Default \"0\": the first failure stops the update. Nothing is rolled back: an in-place update cannot be undone by writing the old spec back."
  type        = string
  default     = "0"
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]+$", var.max_failures)) || (can(regex("^[0-9]{1,3}%$", var.max_failures)) && try(tonumber(trimsuffix(var.max_failures, "%")) <= 100, false))
    error_message = "max_failures must be a whole number >= 0 or a percentage from 0% to 100%."
  }
}

variable "verify_timeout" {
  description = "Longest wait, per owner, for every machine to be up to date and its Node Ready on `kubernetes_version`, as a duration. In the fleet form a cluster not up to date within it counts against `max_failures`."
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
  description = "Optional JSON merge patch (as an HCL object) of the bootstrap config `spec`, e.g. `{ ntp = { servers = [\"time.example.com\"] } }`. Ephemeral and sensitive (it may hold a join token or a file's secret content): it may come from an ephemeral resource or variable, and goes to the resource's write-only `bootstrap_config_spec_patch`, never in the plan or the state. Null or `{}`: none."
  type        = any
  default     = null
  sensitive   = true
  ephemeral   = true
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

variable "topology_variables" {
  description = "Fleet form with `update_control_plane = true`, on Clusters built from a ClusterClass: values for named variables of `Cluster.spec.topology.variables`, as HCL values (the module JSON-encodes each), e.g. `{ workerNote = \"v2\", replicas = 3 }`. Written by name in the same write as the version, the other variables left as they are. Default null: none."
  type        = any
  default     = null

  validation {
    condition     = var.topology_variables == null || can(keys(var.topology_variables))
    error_message = "topology_variables must be a map or object of variable name to value."
  }
}
