variable "name" {
  description = "Name of the rollout, unique within `namespace`; it names the records in the clusters. Changing it replaces the rollout."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label: lower case letters, digits and '-', 1 to 63 characters, starting and ending with a letter or digit."
  }
}

variable "namespace" {
  description = "Namespace of the Cluster API `Cluster` objects in the management cluster."
  type        = string
  nullable    = false

  validation {
    condition     = length(trimspace(var.namespace)) > 0
    error_message = "namespace must not be empty."
  }
}

variable "manifests" {
  description = "Multi-document YAML of the objects to roll out (e.g. `file(\"app.yaml\")` or `templatefile(...)`). Namespaces and CRDs are applied first."
  type        = string
  nullable    = false

  validation {
    condition     = length(trimspace(var.manifests)) > 0
    error_message = "manifests must not be empty."
  }
}

variable "selector_labels" {
  description = "Labels a `Cluster` must carry to be rolled out to (ANDed with `selector_expressions`). Ignored when `clusters` is set; with neither, every Cluster in the namespace is picked."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "selector_expressions" {
  description = "Label requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`), ANDed with `selector_labels`."
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

variable "names" {
  description = "Names of the `Cluster` objects to roll out to, instead of a selector. Null (the default): pick by selector. An empty list is an error, not \"every Cluster\"."
  type        = list(string)
  default     = null

  validation {
    condition     = alltrue([for c in coalesce(var.names, []) : length(trimspace(c)) > 0])
    error_message = "names must not contain empty names."
  }
}

variable "clusters" {
  description = "Deprecated: the former name of `names`, still accepted. Set one of the two."
  type        = list(string)
  default     = null

  validation {
    condition     = alltrue([for c in coalesce(var.clusters, []) : length(trimspace(c)) > 0])
    error_message = "clusters must not contain empty names."
  }
}

variable "canary" {
  description = "Clusters changed first, in this order, each wave verified and baked before the percentage waves start. Empty: no canary."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for c in var.canary : length(trimspace(c)) > 0])
    error_message = "canary must not contain empty names."
  }
  validation {
    condition     = length(distinct(var.canary)) == length(var.canary)
    error_message = "canary must not name a cluster twice."
  }
}

variable "wave_size" {
  description = "Most clusters changed at once after the canary (the rollout's `update_limit`): a percentage of the eligible clusters from 1% to 100% (\"25%\"), rounded up, or a whole number >= 1 (\"2\")."
  type        = string
  default     = "25%"
  nullable    = false

  validation {
    condition     = can(regex("^[1-9][0-9]*$", var.wave_size)) || (can(regex("^[0-9]{1,3}%$", var.wave_size)) && try(tonumber(trimsuffix(var.wave_size, "%")) >= 1 && tonumber(trimsuffix(var.wave_size, "%")) <= 100, false))
    error_message = "wave_size must be a percentage from 1% to 100% (e.g. \"25%\") or a whole number >= 1 (e.g. \"2\")."
  }
}

variable "bake_time" {
  description = "Wait after each wave is verified, before it is checked again and the next wave starts, as a duration."
  type        = string
  default     = "30s"
  nullable    = false

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", var.bake_time))
    error_message = "bake_time must be a duration such as \"30s\" or \"5m\"."
  }
}

variable "verify_timeout" {
  description = "Longest wait for the objects on one cluster to become ready (kstatus), as a duration."
  type        = string
  default     = "5m"
  nullable    = false

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", var.verify_timeout))
    error_message = "verify_timeout must be a duration such as \"90s\" or \"5m\"."
  }
}

variable "http_checks" {
  description = "Extra HTTP checks run from where Terraform runs after the objects are ready; `{cluster}` in `url` is replaced by the cluster name."
  type = list(object({
    url             = string
    expected_status = optional(number)
    timeout         = optional(string)
  }))
  default  = []
  nullable = false

  validation {
    condition     = alltrue([for c in var.http_checks : can(regex("^https?://", c.url))])
    error_message = "http_checks: every url must start with http:// or https://."
  }
}

variable "max_failures" {
  description = "Clusters that may fail before no new wave starts: a whole number >= 0 or a percentage from 0% to 100%."
  type        = string
  default     = "0"
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]+$", var.max_failures)) || (can(regex("^[0-9]{1,3}%$", var.max_failures)) && try(tonumber(trimsuffix(var.max_failures, "%")) <= 100, false))
    error_message = "max_failures must be a whole number >= 0 or a percentage from 0% to 100%."
  }
}

variable "on_failure" {
  description = "When failures exceed `max_failures`: `rollback` restores every cluster this apply changed to its backup revision; `halt` leaves the clusters that succeeded."
  type        = string
  default     = "rollback"
  nullable    = false

  validation {
    condition     = contains(["rollback", "halt"], var.on_failure)
    error_message = "on_failure must be \"rollback\" or \"halt\"."
  }
}

variable "retry_invalid" {
  description = "Apply the revision even though it is recorded invalid (after fixing what made it fail outside the manifests)."
  type        = bool
  default     = false
  nullable    = false
}

variable "force_conflicts" {
  description = "Take ownership of fields another server-side applier owns (server-side apply force). Fields another gradual_rollout or gradual_module_assignment applied are never taken."
  type        = bool
  default     = false
  nullable    = false
}

variable "ignore_fields" {
  description = "Fields other controllers own (an HPA's `.spec.replicas`), left to them by apply and drift detection: rules of optional `kind`, `namespace`, `name` and the `paths`."
  type = list(object({
    kind      = optional(string)
    namespace = optional(string)
    name      = optional(string)
    paths     = list(string)
  }))
  default = null
}

variable "default_namespace" {
  description = "Namespace for namespaced objects of `manifests` that name none (typical `helm template` output)."
  type        = string
  default     = null
}

variable "deletion_policy" {
  description = "On destroy, and for clusters that stop being picked: `delete` removes the applied objects (in waves); `orphan` leaves them and removes only the records."
  type        = string
  default     = "delete"
  nullable    = false

  validation {
    condition     = contains(["delete", "orphan"], var.deletion_policy)
    error_message = "deletion_policy must be \"delete\" or \"orphan\"."
  }
}

variable "record_namespace" {
  description = "Namespace, in every workload cluster and in the management cluster, of the rollout's records and Lease. Changing it replaces the rollout."
  type        = string
  default     = "gradual-system"
  nullable    = false
}

variable "timeouts" {
  description = "Operation timeouts (`create`, `update`, `delete`) as durations; unset uses the provider's defaults."
  type = object({
    create = optional(string)
    update = optional(string)
    delete = optional(string)
  })
  default = null
}

variable "sensitive_manifests" {
  description = "Multi-document YAML of objects whose content must never be shown or stored by Terraform (`Secret`s, credentials), applied with `manifests` as one bundle; a changed value still changes the revision. Ephemeral: it may come from an ephemeral resource or variable, and goes to the rollout's write-only `sensitive_manifests`. Not with `delivery` (refused at plan: the artifact would hold it). Null or \"\": none."
  type        = string
  default     = null
  sensitive   = true
  ephemeral   = true
}

variable "sensitive_paths" {
  description = "Fields to treat like a Secret's data (a ConfigMap's `.data.password`): a value at one of these paths in the manifests is refused at plan time, naming the object and the path, never the value; such objects belong in `sensitive_manifests`. Rules of optional `kind`, `namespace`, `name` and the `paths`."
  type = list(object({
    kind      = optional(string)
    namespace = optional(string)
    name      = optional(string)
    paths     = list(string)
  }))
  default = null
}

variable "adopt" {
  description = "Take over objects of the manifests that already exist in a cluster, made by someone else (kubectl, Helm); `false` refuses, at plan time, a cluster where such an object exists."
  type        = bool
  default     = true
  nullable    = false
}

variable "canary_optional" {
  description = "Let the rollout go ahead when a listed canary cannot be in the first waves (skipped, not ready, not picked). Default false: the plan fails naming the canary."
  type        = bool
  default     = false
  nullable    = false
}

variable "stages" {
  description = "Ordered stages after the canaries: each picks clusters by `names` and/or `match_labels`, with its own `update_limit`, `max_failures` and `bake_time` (the rollout's where left out). A stage past its own `max_failures` stops the apply before the next. Default: no stages."
  type = list(object({
    name         = string
    names        = optional(list(string))
    match_labels = optional(map(string))
    update_limit = optional(string)
    max_failures = optional(string)
    bake_time    = optional(string)
  }))
  default = null
}

variable "promote_until" {
  description = "The last stage this apply carries the revision to; later stages wait (the plan's `waves` says how many clusters). Default null: every stage."
  type        = string
  default     = null
}

variable "values" {
  description = "Per-cluster values: `manifests` (and `sensitive_manifests`, `check_job`) become a template rendered for each cluster with Flux's `postBuild.substitute` rules. `from_labels` and `from_annotations` map a variable to a Cluster label or annotation key, `selected` gives variables to the clusters whose labels include `match_labels`, `clusters` to one cluster by name. Default null: nothing is substituted."
  type = object({
    from_labels      = optional(map(string))
    from_annotations = optional(map(string))
    selected = optional(list(object({
      match_labels = map(string)
      values       = map(string)
    })))
    clusters = optional(map(map(string)))
  })
  default = null
}

variable "preview" {
  description = "Which clusters the plan dry-runs the new revision on: \"canary\" (the provider's default: the canary waves, or the first wave), \"all\" or \"none\". A rejection fails the plan naming the cluster, the object and the server's reason."
  type        = string
  default     = null

  validation {
    condition     = var.preview == null || contains(["canary", "all", "none"], coalesce(var.preview, "canary"))
    error_message = "preview must be \"canary\", \"all\" or \"none\"."
  }
}

variable "max_unsettled" {
  description = "How many clusters (a whole number or a percentage) may stop answering after their change began before no new wave starts. Default null: the provider's \"0\", the first such cluster halts the rollout."
  type        = string
  default     = null
}

variable "health_checks" {
  description = "CEL health expressions per `api_version` and `kind` (`current`, optional `failed` and `in_progress`): objects of a listed kind are judged by them instead of kstatus. Default: none."
  type = list(object({
    api_version = string
    kind        = string
    current     = string
    failed      = optional(string)
    in_progress = optional(string)
  }))
  default  = []
  nullable = false
}

variable "cluster_gates" {
  description = "Read each Cluster's `Available` condition and every Node's `Ready` condition before each wave and after each change (the provider's default, true); false turns the gates off."
  type        = bool
  default     = null
}

variable "check_job" {
  description = "A `batch/v1` Job (`manifest`, YAML; optional `timeout`, default \"5m\") run in each cluster once the objects are ready: a Job that fails or does not finish fails the cluster. Default null: none."
  type = object({
    manifest = string
    timeout  = optional(string)
  })
  default = null
}

variable "delivery" {
  description = "Deliver through Flux instead of applying from where Terraform runs: `{ flux = { repository = \"oci://host/path\", ... } }`, the rollout's `delivery` without its write-only credentials, which are `registry_password`, `registry_token` and `registry_client_key`. `flux` takes `repository` (required), `insecure`, `ca_bundle`, `secret_ref`, `cert_secret_ref`, `username` and `client_certificate`. Default null: the provider applies each revision itself. Changing between direct and Flux replaces the rollout."
  type = object({
    flux = object({
      repository         = string
      insecure           = optional(bool)
      ca_bundle          = optional(string)
      secret_ref         = optional(string)
      cert_secret_ref    = optional(string)
      username           = optional(string)
      client_certificate = optional(string)
      # Declared only to be refused with a pointer to the ephemeral inputs (an undeclared one would be dropped silently).
      password   = optional(string)
      token      = optional(string)
      client_key = optional(string)
    })
  })
  default = null

  validation {
    condition     = var.delivery == null ? true : can(regex("^oci://[^/]+/.+", var.delivery.flux.repository))
    error_message = "delivery needs flux, and delivery.flux.repository must be oci://host[:port]/path, without a tag."
  }
  validation {
    condition     = var.delivery == null ? true : try(var.delivery.flux.password == null && var.delivery.flux.token == null && var.delivery.flux.client_key == null, true)
    error_message = "delivery.flux takes no password, token or client_key: give them in registry_password, registry_token and registry_client_key (ephemeral, never in the plan or the state)."
  }
}

variable "registry_password" {
  description = "Password (or access token used as one) for `delivery.flux.username`, with which the provider pushes each revision. Ephemeral and write-only: never in the plan or the state, given again on every run. Only with `delivery`. Null or \"\": none."
  type        = string
  default     = null
  sensitive   = true
  ephemeral   = true
}

variable "registry_token" {
  description = "Registry token the provider pushes with, sent as a bearer token; not with `delivery.flux.username`. Ephemeral and write-only, like `registry_password`. Only with `delivery`. Null or \"\": none."
  type        = string
  default     = null
  sensitive   = true
  ephemeral   = true
}

variable "registry_client_key" {
  description = "PEM private key of `delivery.flux.client_certificate`, for a registry that requires client certificates. Ephemeral and write-only, like `registry_password`. Only with `delivery`. Null or \"\": none."
  type        = string
  default     = null
  sensitive   = true
  ephemeral   = true
}
