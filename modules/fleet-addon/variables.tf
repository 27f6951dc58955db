variable "name" {
  description = "Name of the assignment, unique within `namespace`; it names the records and bindings in the clusters. Changing it replaces the assignment."
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

variable "selector_labels" {
  description = "Labels a `Cluster` must carry to get the modules (ANDed with `selector_expressions`). Clusters that gain these labels later get the modules on the next apply; clusters that lose them are handled by `deletion_policy`."
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

variable "modules" {
  description = "The bundles to put on every picked cluster: `name` (a DNS label, unique), `version` (for people), `manifests` (multi-document YAML), optional `depends_on` (names of modules applied and verified first on each cluster), optional `default_namespace` (for the module's objects that name none, as `helm template` output often does not) and optional `sensitive_manifests` (the module's `Secret`s and credentials, never shown or stored by Terraform: write-only). A module's `sensitive_manifests` here cannot be an ephemeral value: give it in the ephemeral `sensitive_manifests` input instead."
  type = list(object({
    name                = string
    version             = string
    manifests           = string
    depends_on          = optional(list(string), [])
    default_namespace   = optional(string)
    sensitive_manifests = optional(string)
  }))
  nullable = false

  validation {
    condition     = length(var.modules) > 0
    error_message = "modules must name at least one module."
  }
  validation {
    condition     = alltrue([for m in var.modules : can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", m.name))])
    error_message = "Every module name must be a DNS label (lower case letters, digits and '-')."
  }
  validation {
    condition     = length(distinct([for m in var.modules : m.name])) == length(var.modules)
    error_message = "Module names must be unique."
  }
  validation {
    condition     = alltrue([for m in var.modules : length(trimspace(m.version)) > 0 && length(trimspace(m.manifests)) > 0])
    error_message = "Every module needs a non-empty version and manifests."
  }
  validation {
    condition     = alltrue(flatten([for m in var.modules : [for d in m.depends_on : contains([for o in var.modules : o.name], d) && d != m.name]]))
    error_message = "depends_on may only name other modules of this list."
  }
}

variable "mode" {
  description = "`Reconcile` re-applies a module when it changes or its objects drift; `ApplyOnce` applies each module once per cluster, like a ClusterResourceSet with strategy ApplyOnce."
  type        = string
  default     = "Reconcile"
  nullable    = false

  validation {
    condition     = contains(["Reconcile", "ApplyOnce"], var.mode)
    error_message = "mode must be \"Reconcile\" or \"ApplyOnce\"."
  }
}

variable "update_limit" {
  description = "Most clusters a module changes at once: a whole number >= 1 (\"2\") or a percentage of the eligible clusters from 1% to 100% (\"10%\"), rounded up."
  type        = string
  default     = "1"
  nullable    = false

  validation {
    condition     = can(regex("^[1-9][0-9]*$", var.update_limit)) || (can(regex("^[0-9]{1,3}%$", var.update_limit)) && try(tonumber(trimsuffix(var.update_limit, "%")) >= 1 && tonumber(trimsuffix(var.update_limit, "%")) <= 100, false))
    error_message = "update_limit must be a whole number >= 1 (e.g. \"2\") or a percentage from 1% to 100% (e.g. \"10%\")."
  }
}

variable "max_failures" {
  description = "Clusters a module may fail on before its next wave is not started: a whole number >= 0 or a percentage from 0% to 100%."
  type        = string
  default     = "0"
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]+$", var.max_failures)) || (can(regex("^[0-9]{1,3}%$", var.max_failures)) && try(tonumber(trimsuffix(var.max_failures, "%")) <= 100, false))
    error_message = "max_failures must be a whole number >= 0 or a percentage from 0% to 100%."
  }
}

variable "deletion_policy" {
  description = "For clusters that stop matching, modules removed from `modules`, and destroy: `delete` removes the applied objects, `orphan` leaves them and removes only the records."
  type        = string
  default     = "delete"
  nullable    = false

  validation {
    condition     = contains(["delete", "orphan"], var.deletion_policy)
    error_message = "deletion_policy must be \"delete\" or \"orphan\"."
  }
}

variable "record_namespace" {
  description = "Namespace, in every workload cluster and in the management cluster, of the records, bindings and Leases. Changing it replaces the assignment."
  type        = string
  default     = "gradual-system"
  nullable    = false
}

variable "verify_timeout" {
  description = "Longest wait for a module's objects on one cluster to become ready (kstatus), as a duration."
  type        = string
  default     = "5m"
  nullable    = false

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", var.verify_timeout))
    error_message = "verify_timeout must be a duration such as \"90s\" or \"5m\"."
  }
}

variable "bake_time" {
  description = "Wait after a wave is verified, before it is checked again and the next wave starts, as a duration."
  type        = string
  default     = "0s"
  nullable    = false

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", var.bake_time))
    error_message = "bake_time must be a duration such as \"0s\" or \"30s\"."
  }
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

variable "names" {
  description = "Names of the `Cluster` objects to put the modules on, instead of a selector. Null (the default): pick by selector. An empty list is an error, not \"every Cluster\"."
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
  description = "Clusters each module changes first, in this order, in waves of their own, each verified before the module goes anywhere else. Empty: no canary."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for c in var.canary : length(trimspace(c)) > 0]) && length(distinct(var.canary)) == length(var.canary)
    error_message = "canary must not contain empty names or name a cluster twice."
  }
}

variable "canary_optional" {
  description = "Let a module go ahead when a listed canary cannot be in the first waves (skipped, not ready, not picked). Default false: the plan fails naming the canary."
  type        = bool
  default     = false
  nullable    = false
}

variable "on_failure" {
  description = "When a module's failures exceed `max_failures`: `halt` (the default) keeps it on the clusters where it succeeded; `rollback` restores every cluster the apply took it to."
  type        = string
  default     = "halt"
  nullable    = false

  validation {
    condition     = contains(["rollback", "halt"], var.on_failure)
    error_message = "on_failure must be \"rollback\" or \"halt\"."
  }
}

variable "retry_invalid" {
  description = "Apply a module's revision even though it is recorded invalid (after fixing what made it fail outside the manifests)."
  type        = bool
  default     = false
  nullable    = false
}

variable "force_conflicts" {
  description = "Take ownership of fields another server-side applier owns (a ClusterResourceSet being retired, Helm). Fields another gradual_rollout or gradual_module_assignment applied are never taken."
  type        = bool
  default     = false
  nullable    = false
}

variable "adopt" {
  description = "Take over objects of the modules that already exist in a cluster, made by someone else (kubectl, Helm, a ClusterResourceSet); `false` refuses, at plan time, a cluster where such an object exists."
  type        = bool
  default     = true
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

variable "maintenance_window" {
  description = "When the assignment may change clusters: `schedule` (cron, five fields), `duration` (e.g. \"4h\") and optional `time_zone` (IANA, default UTC). A cluster outside it is skipped with the time it opens next. Null: any time."
  type = object({
    schedule  = string
    duration  = string
    time_zone = optional(string)
  })
  default = null
}

variable "sensitive_paths" {
  description = "Fields to treat like a Secret's data (a ConfigMap's `.data.password`): a value at one of these paths in a module's manifests is refused at plan time, naming the object and the path, never the value; such objects belong in the module's `sensitive_manifests`. Rules of optional `kind`, `namespace`, `name` and the `paths`."
  type = list(object({
    kind      = optional(string)
    namespace = optional(string)
    name      = optional(string)
    paths     = list(string)
  }))
  default = null
}

variable "values" {
  description = "Per-cluster values: every module's `manifests` (and `sensitive_manifests`, and `check_job`) become a template rendered for each cluster with Flux's `postBuild.substitute` rules. `from_labels` and `from_annotations` map a variable to a Cluster label or annotation key, `selected` gives variables to the clusters whose labels include `match_labels`, `clusters` to one cluster by name. Default null: nothing is substituted."
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
  description = "Which clusters the plan dry-runs each changing module on: \"canary\" (the provider's default: the module's canary waves, or its first wave), \"all\" or \"none\". A rejection fails the plan naming the cluster, the module, the object and the server's reason."
  type        = string
  default     = null

  validation {
    condition     = var.preview == null || contains(["canary", "all", "none"], coalesce(var.preview, "canary"))
    error_message = "preview must be \"canary\", \"all\" or \"none\"."
  }
}

variable "max_unsettled" {
  description = "How many clusters (a whole number or a percentage) may stop answering after their change began before no new wave starts. Default null: the provider's \"0\", the first such cluster halts the assignment."
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
  description = "A `batch/v1` Job (`manifest`, YAML; optional `timeout`, default \"5m\") run in each cluster after the last module the apply delivers there: a Job that fails or does not finish fails that module there. Default null: none."
  type = object({
    manifest = string
    timeout  = optional(string)
  })
  default = null
}

variable "sensitive_manifests" {
  description = "Per module name, multi-document YAML of the module's objects whose content must never be shown or stored by Terraform (`Secret`s, credentials), applied with its `manifests` as one bundle; a changed value still changes the module's revision. Ephemeral: it may come from an ephemeral resource or variable, and goes to the module's write-only `sensitive_manifests`. The same as `modules[].sensitive_manifests`, which cannot take an ephemeral value; set a module's in one of the two. Not with `delivery` (refused at plan)."
  type        = map(string)
  default     = {}
  nullable    = false
  sensitive   = true
  ephemeral   = true
}

variable "delivery" {
  description = "Deliver through Flux instead of applying from where Terraform runs: `{ flux = { repository = \"oci://host/path\", ... } }`, the assignment's `delivery` without its write-only credentials, which are `registry_password`, `registry_token` and `registry_client_key`. `flux` takes `repository` (required), `insecure`, `ca_bundle`, `secret_ref`, `cert_secret_ref`, `username` and `client_certificate`. Default null: the provider applies each module itself. Changing between direct and Flux replaces the assignment."
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
  description = "Password (or access token used as one) for `delivery.flux.username`, with which the provider pushes each module revision. Ephemeral and write-only: never in the plan or the state, given again on every run. Only with `delivery`. Null or \"\": none."
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
