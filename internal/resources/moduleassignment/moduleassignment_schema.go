package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// defaultOnFailure keeps, per module, the clusters that took it when others fail: what
// assignments did before `on_failure` existed.
const defaultOnFailure = engine.Halt

// changeText is what an assignment says in the change attributes it shares with rollouts.
var changeText = fleetresource.ChangeText{
	Canary:   "Clusters each module changes first",
	Subject:  "a module",
	Revision: "a module's revision",
	OnFailure: "When a module's failures exceed `max_failures`: `halt` starts no new wave of it and leaves it on the clusters " +
		"where it succeeded; `rollback` also restores every cluster this apply changed it on to its backup revision (the " +
		"modules that depend on it are then blocked there). Either way a module is restored where it failed, and the other " +
		"modules go on. Default `halt`.",
}

// Defaults, shown in the schema and used when the attribute is left out.
const (
	defaultMode            = "Reconcile"
	defaultUpdateLimit     = "1"
	defaultMaxFailures     = "0"
	defaultRecordNamespace = "gradual-system"
	defaultDeletionPolicy  = "delete"
)

// dnsLabel is a DNS label (fleetresource.DNSLabel).
var dnsLabel = fleetresource.DNSLabel

var verifyAttrTypes = fleetresource.VerifyAttrTypes(fleetresource.HealthChecks, fleetresource.ClusterGates, fleetresource.NodeGate, checkJob)

// checkJob is `verify.check_job` (delivery.CheckJob), once per cluster after its modules.
var checkJob = fleetresource.CheckJob("A Kubernetes Job run in each cluster once every module this apply delivers there is verified " +
	"(after the last of them in `depends_on` order, whose failure there it is; a cluster no module changes runs none)")

var moduleAttrTypes = map[string]attr.Type{
	"name":                types.StringType,
	"version":             types.StringType,
	"manifests":           manifesttype.Type{},
	"sensitive_manifests": types.StringType,
	"depends_on":          types.ListType{ElemType: types.StringType},
	"default_namespace":   types.StringType,
}

var sensitiveObjectsType = types.ListType{ElemType: types.StringType}

// objectsType: per module, its objects (manifesttype.Objects).
var objectsType = types.MapType{ElemType: manifesttype.ObjectsType}

// wavesType: per module, its waves in one line (fleetresource.WavesText).
var wavesType = types.StringType

func (r *assignmentResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		// Version 1: each module's `waves` is one line of text (it was a list of counts; see UpgradeState).
		Version: fleetresource.StateVersion,
		MarkdownDescription: "Puts bundles of manifests (`modules`) on every Cluster API cluster a selector picks, including clusters " +
			"that match later, like Cluster API's ClusterResourceSet — with deletion, drift repair and verified updates. Each module " +
			"goes out through the same engine as `gradual_rollout` (waves of `update_limit` clusters, verification, restore to the " +
			"last good revision, invalid-revision ledger). What each cluster got is recorded in per-cluster bindings in the " +
			"management cluster. A plan stays the size of the change, not of the fleet: `summary` counts clusters by state, " +
			"`attention` names the clusters needing it, `waves` are counts; every cluster's bindings are in the " +
			"`gradual_module_assignment_status` data source. " + fleetresource.HoldsDescription,
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, MarkdownDescription: "`namespace/name`.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name":      fleetresource.ResourceName("Name of the assignment, unique within `namespace`; it names the records and bindings. Changing it replaces the resource."),
			"namespace": fleetresource.ResourceNamespace(),
			"selector":  fleetresource.ExclusiveResourceSelector("names"),
			"names": fleetresource.ResourceNames("Names of the `Cluster` objects to put the modules on, instead of `selector` (the attribute " +
				"`gradual_rollout` and the `gradual_clusters` data source have). A listed cluster that does not exist is skipped with a " +
				"warning, and gets the modules once it exists; one removed from the list leaves, as a cluster that stops matching " +
				"the selector does."),
			"modules": schema.ListNestedAttribute{
				Required: true,
				MarkdownDescription: "The bundles to put on every picked cluster. On each cluster they are applied in `depends_on` order " +
					"(e.g. CRDs before what uses them); a module that fails on a cluster blocks the modules that depend on it there only.",
				Validators: []validator.List{listvalidator.SizeAtLeast(1)},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{
						Required: true, MarkdownDescription: "Module name, unique within the assignment (a DNS label).",
						Validators: []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
					},
					"version": schema.StringAttribute{
						Required: true, MarkdownDescription: "Version of the module, for people: what is applied is named by the `revision` of `manifests`.",
						Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"manifests": schema.StringAttribute{
						Required: true, CustomType: manifesttype.Type{}, PlanModifiers: []planmodifier.String{manifesttype.KeepPriorOnSameRevision()},
						// Sensitive for the CLI's sake only: see `objects`.
						Sensitive: true,
						MarkdownDescription: "Multi-document YAML of the module's objects. Namespaces and CRDs are applied first. " +
							"Plans show it object by object, under `objects`, changed objects only; the text itself is marked sensitive so " +
							"that the CLI does not print all of it for a one-line edit. It is not a secret: it is stored in state and in plan " +
							"files, so objects of kind `Secret` are refused here: put them in `sensitive_manifests`.",
						Validators: []validator.String{stringvalidator.LengthAtLeast(1), fleetresource.Manifests(), fleetresource.NoSecrets(secretsAdvice)},
					},
					"sensitive_manifests": schema.StringAttribute{
						Optional: true, Sensitive: true, WriteOnly: true,
						MarkdownDescription: "Multi-document YAML of the module's objects whose content must never be shown or stored by " +
							"Terraform: `Secret`s, or anything holding credentials. Write-only (Terraform 1.11+, OpenTofu 1.11+): read from the " +
							"configuration at plan and apply, never kept in the plan or the state. It is applied with `manifests` as one bundle " +
							"and is part of the module's revision, so a changed value plans an update (`revisions` changes) though the value " +
							"itself is never shown; `sensitive_objects` names the objects. The records in the workload clusters keep the " +
							"objects (as Secrets), so refresh, drift repair, restore and removal work without it; the management cluster's " +
							"record keeps only the public half. An imported assignment restores `manifests` only: set this again in the configuration.",
						Validators: []validator.String{fleetresource.SensitiveManifests()},
					},
					"depends_on": schema.ListAttribute{
						Optional: true, ElementType: types.StringType,
						MarkdownDescription: "Names of modules of this assignment that must be applied (and verified) on a cluster before this one.",
						Validators:          []validator.List{listvalidator.UniqueValues()},
					},
					"default_namespace": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "Namespace for the objects of this module's `manifests` and `sensitive_manifests` that name none, as " +
							"`helm template` and `kubectl kustomize` output often does not (like `kubectl apply -n`). Objects of cluster-scoped " +
							"kinds stay without one: the built-in ones (Namespace, ClusterRole, CRDs, webhooks, StorageClass, …) and kinds a CRD " +
							"of the module defines with `scope: Cluster`; other custom kinds are taken as namespaced. The namespace must exist in " +
							"the clusters or be in the module. Part of the module's revision (the objects carry it): the revision is that of the " +
							"same objects written with the namespace. Without it, a namespaced object without a namespace fails the plan's " +
							"check, before anything is applied.",
						Validators: []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
					},
				}},
			},
			"values":   fleetresource.ValuesAttribute(valuesText),
			"delivery": deliveryAttribute(),
			"mode": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMode),
				MarkdownDescription: "`Reconcile` re-applies a module when it changes (in verified waves, restoring on failure) or its objects drift. " +
					"`ApplyOnce` applies each module once per cluster: clusters that have it keep what they got when the module changes " +
					"(the plan warns how many), clusters without it get the current version. Default `" + defaultMode + "`.",
				Validators: []validator.String{stringvalidator.OneOf("Reconcile", "ApplyOnce")},
			},
			"update_limit": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultUpdateLimit),
				MarkdownDescription: "Most clusters a module changes at once: a whole number ≥ 1 or a percentage of the eligible clusters, rounded up. Default `\"" + defaultUpdateLimit + "\"`.",
				Validators:          []validator.String{fleetresource.UpdateLimit()},
			},
			"max_failures":  fleetresource.MaxFailuresAttribute(defaultMaxFailures, "Clusters a module may fail on before its next wave is not started: a whole number ≥ 0 or a percentage. Clusters that succeeded keep the module. Default `\"0\"`."),
			"max_unsettled": fleetresource.MaxUnsettledAttribute(),
			"verify": fleetresource.VerifyAttribute(fleetresource.VerifyDescriptions{
				Verify:   "How each cluster is verified after a module is applied: every object ready (kstatus) within `timeout`, then `bake_time`.",
				Timeout:  "Longest wait for a module's objects on one cluster to become ready. Default `" + fleetresource.DefaultVerifyTimeout + "`.",
				BakeTime: "Wait after a wave is verified before it is checked again. Default `0s`.",
			}, fleetresource.HealthChecks, fleetresource.ClusterGates, fleetresource.NodeGate, checkJob),
			"preview":         fleetresource.PreviewAttribute(),
			"canary":          fleetresource.CanaryAttribute(changeText),
			"canary_optional": fleetresource.CanaryOptionalAttribute(changeText),
			"on_failure":      fleetresource.OnFailureAttribute(changeText, defaultOnFailure),
			"force_conflicts": fleetresource.ForceConflictsAttribute(),
			"retry_invalid":   fleetresource.RetryInvalidAttribute(changeText),
			"deletion_policy": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultDeletionPolicy),
				MarkdownDescription: "For clusters that stop matching, modules removed from `modules`, and destroy: `delete` removes the applied objects; `orphan` leaves them and removes only the records. Default `delete`.",
				Validators:          []validator.String{stringvalidator.OneOf("delete", "orphan")},
			},
			ignoreattr.Name:          ignoreattr.Attribute("every module's `manifests`"),
			ignoreattr.SensitiveName: ignoreattr.SensitiveAttribute("a module's `manifests`", "the module's `sensitive_manifests`"),
			"adopt": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Take over objects of the modules that already exist in a cluster, made by someone else (kubectl, Helm, …): they are recorded as adopted before the first apply and never deleted by the assignment (a failed first revision puts them back as they were; removal gives them back to their other field managers). `false` refuses, at plan time, a cluster where such an object exists. Default `true`.\n\n" +
					"Records missing: a cluster that holds no record of a module (its record namespace was deleted, or the cluster restored from a backup without it) " +
					"but holds objects of the module under the module's own field manager is `records-missing` in `summary` and `attention` (with the objects found), " +
					"and the module is held back there (skipped, its binding kept): nothing of it is applied, pruned, deleted or restored to nothing, since what runs there is unknown. " +
					"Writing `adopt = true` in the configuration (the default alone does not) is the opt-in: those objects are taken over as adopted, with their content as found, " +
					"so a failing revision puts them back as they are instead of deleting them, and removal gives them back.",
			},
			"maintenance_window": fleetresource.MaintenanceWindowAttribute("assignment"),
			"record_namespace": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultRecordNamespace),
				MarkdownDescription: "Namespace, in every workload cluster and in the management cluster, of the records, bindings and Leases. Default `" + defaultRecordNamespace + "`. Changing it replaces the resource.",
				Validators:          []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"timeouts":     timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
			"follow_joins": followJoinsAttribute,
			"bridge":       bridgeAttribute,

			"revisions": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Per module, the revision of its `manifests`: a short hash of the normalized objects, known at plan time.",
			},
			"objects": schema.MapAttribute{
				Computed: true, ElementType: objectsType,
				MarkdownDescription: "Per module, its objects: " + manifesttype.ObjectsDescription("the module's `manifests`"),
			},
			"sensitive_objects": schema.MapAttribute{
				Computed: true, ElementType: sensitiveObjectsType,
				MarkdownDescription: "Per module with `sensitive_manifests`, its objects by identity only (`group/Kind namespace/name`), never their content. Known at plan time.",
			},
			"summary": schema.MapAttribute{
				Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "How many clusters are in each state — the worst of their modules: `current` (every module applied on its " +
					"revision, objects as applied), `kept` (ApplyOnce: an older version kept on purpose), `outdated` (a module on another " +
					"revision or not applied yet), `joining` (no module applied yet), `values-changed` (with `values`: a module renders " +
					"differently for it now), `provisioning` (an apply stopped while changing it), " +
					"`drifted` (objects missing or edited), `blocked` (a module it depends on is not applied), `failed`, " +
					"`records-missing` (no record of a module there, but objects of it under its field manager: held back, see `adopt`), `skipped`, and " +
					"`leaving` (no longer matches the selector). Where clusters end up depends on how apply fares, so while a plan changes " +
					"anything this is known after apply. Per-cluster bindings are in the `gradual_module_assignment_status` data source.",
			},
			"attention": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The clusters that need attention, each with what is wrong, per module: the objects and fields that " +
					"drifted (never their values), the objects a module renders differently for it now (`values`), a failure and its " +
					"reason, a blocked dependency, an interrupted apply, a cluster joining or leaving. Skipped clusters are in `skipped`. Empty when every cluster is current, so a plan names only the " +
					"clusters that matter, at any fleet size.",
			},
			"leaving": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The clusters apply lets go of, sorted: they hold bindings of this assignment and the selector no " +
					"longer picks them, as the refresh before this plan read it. Apply removes the modules there (or keeps their " +
					"objects, with `deletion_policy = \"orphan\"`) and drops the bindings — on these clusters and no other: a cluster " +
					"that starts leaving after the plan waits for the next plan, and one that came back since is left alone. When the " +
					"plan changes the selector, the clusters that leave because of it are listed by the next plan. After a plan with " +
					"nothing to do it keeps the last apply's list.",
			},
			"waves": schema.MapAttribute{
				Computed: true, ElementType: wavesType,
				MarkdownDescription: "Per module, the planned waves in one line, as counts in order with runs of the same size together " +
					"(`\"3 waves: 2 waves of 10 clusters, then 1 wave of 4 clusters\"`, `\"none\"`), one line however many waves; the `Planned Waves` warning names their " +
					"clusters. Apply carries out exactly these (the clusters of each wave are kept with the plan): a cluster that joins after " +
					"the plan waits for the next one. Known at plan time when the plan can work from the state (the same clusters picked " +
					"as before); on create, or when `selector` changes, known after apply. After a plan with nothing to do it keeps the " +
					"last apply's waves.",
			},
			"skipped": fleetresource.SkippedAttribute("Picked clusters this apply leaves alone, with the reason (not ready, paused, no kubeconfig…). A later apply picks them up."),
		},
	}
}

// valuesText is what an assignment says in `values` (fleetresource.ValuesAttribute).
var valuesText = fleetresource.ValuesText{
	Template: "every module's `manifests` and `sensitive_manifests` are a template",
	Extra: "A missing variable names the module too. Each module's revision names its template and these rules. With " +
		"`mode = \"ApplyOnce\"` a cluster keeps what was rendered for it when it got a module, as it keeps the module's version: " +
		"a changed label plans nothing there.",
}

// secretsAdvice is where Secrets go instead of modules[].manifests.
const secretsAdvice = "modules[].sensitive_manifests"

// deliveryAttribute is the shared `delivery` attribute, with what it means for modules.
func deliveryAttribute() schema.SingleNestedAttribute {
	a := fleetresource.DeliveryAttribute()
	a.MarkdownDescription += " For a module assignment, each module revision is its own artifact and each (module, cluster) its own " +
		"`Kustomization`. A module's `depends_on` becomes the Kustomization's `dependsOn` on the same cluster: kustomize-controller " +
		"applies a module only while the Kustomizations of the modules it depends on there are `Ready`, between applies too " +
		"(re-checked every `--requeue-dependency`). `mode = \"Reconcile\"`: Flux re-applies every module on its interval and " +
		"repairs drift (the plan does not look for drift itself). `mode = \"ApplyOnce\"`: the Kustomization gives every object " +
		"the `kustomize.toolkit.fluxcd.io/ssa: IfNotPresent` annotation (`commonMetadata`), so Flux creates what is missing and " +
		"never updates an object that exists (edits stay; an object deleted by hand is created again). With `values`, each " +
		"module revision's artifact is its template, and each cluster's Kustomization substitutes that cluster's values " +
		"(`postBuild.substitute`). Not yet with " +
		"`verify.health_checks`, `deletion_policy = \"orphan\"` or `sensitive_manifests`, nor a change of `mode` (refused at plan time). " +
		"A move between the engines goes module by module in `depends_on` order, each module in its own waves, so a module " +
		"reaches the new engine on a cluster only once the modules it depends on did there; with `mode = \"ApplyOnce\"` every " +
		"cluster the old engine holds is moved with the module's configured version, and the move is refused at plan time " +
		"while a cluster keeps an older version of a module (the provider no longer has that content to pin)."
	return a
}
