package rollout

import (
	"context"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
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

// Defaults, shown in the schema and used when the attribute is left out.
const (
	defaultUpdateLimit      = "1"
	defaultMaxFailures      = "0"
	defaultHTTPCheckTimeout = "10s"
	defaultRecordNamespace  = "gradual-system"
	defaultDeletionPolicy   = "delete"
)

// dnsLabel is a DNS label (fleetresource.DNSLabel).
var dnsLabel = fleetresource.DNSLabel

var verifyAttrTypes = fleetresource.VerifyAttrTypes(httpChecks, fleetresource.HealthChecks, fleetresource.ClusterGates, fleetresource.NodeGate, checkJob)

var httpCheckAttrTypes = map[string]attr.Type{
	"url":             types.StringType,
	"expected_status": types.Int64Type,
	"timeout":         types.StringType,
}

var invalidRevisionAttrTypes = map[string]attr.Type{
	"revision":    types.StringType,
	"reason":      types.StringType,
	"clusters":    types.ListType{ElemType: types.StringType},
	"recorded_at": types.StringType,
}

func (r *rolloutResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		// Version 1: `waves` is one line of text (it was a list of counts; see UpgradeState).
		Version: fleetresource.StateVersion,
		MarkdownDescription: "Rolls a revision of Kubernetes manifests out to the Cluster API clusters a selector (or a list of names) " +
			"picks, in waves of at most `update_limit` clusters, verifying after each wave that every applied object is ready. " +
			"A cluster that fails verification is restored to its backup (last good) revision and the failed revision is recorded " +
			"invalid, so later plans refuse it. `terraform plan` shows the revision, the waves, skipped clusters and every cluster " +
			"that is not on the desired revision (drift, joins, interrupted runs), compactly at any fleet size. " + fleetresource.HoldsDescription,
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "`namespace/name`.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name":      fleetresource.ResourceName("Name of the rollout, unique within `namespace`; it names the records in the clusters. Changing it replaces the resource."),
			"namespace": fleetresource.ResourceNamespace(),
			"selector":  fleetresource.ResourceSelector("names", "clusters"),
			"names": func() schema.ListAttribute {
				a := fleetresource.ResourceNames("Names of the `Cluster` objects to roll out to, instead of `selector` (the attribute " +
					"the `gradual_clusters` data source has). A listed cluster that does not exist is skipped with a warning.")
				a.Validators = append(a.Validators, listvalidator.ConflictsWith(path.MatchRoot("clusters")))
				return a
			}(),
			"clusters": func() schema.ListAttribute {
				a := fleetresource.ResourceNames("Deprecated: the former name of `names`, still accepted.")
				a.DeprecationMessage = "Use `names` instead: the same list of Cluster names, under the name the gradual_clusters data source uses. `clusters` keeps working until the next major version."
				return a
			}(),
			"manifests": schema.StringAttribute{
				Optional: true, CustomType: manifesttype.Type{}, PlanModifiers: []planmodifier.String{manifesttype.KeepPriorOnSameRevision()},
				// Sensitive for the CLI's sake only: see `objects`.
				Sensitive: true,
				MarkdownDescription: "Multi-document YAML of the objects to apply to every cluster. Namespaces and CRDs are applied first. " +
					"Its normalized content (with `sensitive_manifests`) names the `revision`. Plans show it object by object, under " +
					"`objects`, changed objects only; the text itself is marked sensitive so that the CLI does not print all of it for " +
					"a one-line edit. It is not a secret: it is stored in state and in plan files, so objects of kind `Secret` are " +
					"refused here: put them in `sensitive_manifests`. At least one of the two is required.",
				Validators: []validator.String{
					stringvalidator.LengthAtLeast(1), fleetresource.Manifests(), fleetresource.NoSecrets("sensitive_manifests"),
					stringvalidator.AtLeastOneOf(path.MatchRoot("sensitive_manifests")),
				},
			},
			"sensitive_manifests": schema.StringAttribute{
				Optional: true, Sensitive: true, WriteOnly: true,
				MarkdownDescription: "Multi-document YAML of objects whose content must never be shown or stored by Terraform: " +
					"`Secret`s, or anything holding credentials. Write-only (Terraform 1.11+, OpenTofu 1.11+): it is read from the " +
					"configuration at plan and apply and never kept in the plan or the state. It is applied with `manifests` as one " +
					"bundle, and its content is part of the `revision`, so a changed Secret value plans an update (the revision " +
					"changes) though the value itself is never shown; `sensitive_objects` names the objects. The records in the " +
					"workload clusters keep the objects (as Secrets), so refresh, drift repair, restore and destroy work without it. " +
					"An imported rollout restores `manifests` only: set this again in the configuration.",
				Validators: []validator.String{fleetresource.SensitiveManifests()},
			},
			"objects": schema.MapAttribute{
				Computed: true, ElementType: manifesttype.ObjectsType,
				MarkdownDescription: manifesttype.ObjectsDescription("`manifests`"),
			},
			"sensitive_objects": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The objects of `sensitive_manifests`, by identity only (`group/Kind namespace/name`), never their content. Known at plan time.",
			},
			"canary":          fleetresource.CanaryAttribute(changeText),
			"canary_optional": fleetresource.CanaryOptionalAttribute(changeText),
			"stages":          stagesAttribute(),
			"promote_until":   promoteUntilAttribute(),
			"update_limit": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultUpdateLimit),
				MarkdownDescription: "Most clusters changed at once: a whole number ≥ 1 (`\"2\"`) or a percentage of the eligible clusters " +
					"from 1% to 100% (`\"25%\"`), rounded up, at least 1. Default `\"" + defaultUpdateLimit + "\"`.",
				Validators: []validator.String{fleetresource.UpdateLimit()},
			},
			"max_failures":  fleetresource.MaxFailuresAttribute(defaultMaxFailures, "Clusters that may fail before no new wave starts: a whole number ≥ 0 or a percentage from 0% to 100%. Default `\"0\"`."),
			"max_unsettled": fleetresource.MaxUnsettledAttribute(),
			"on_failure":    fleetresource.OnFailureAttribute(changeText, engine.Rollback),
			"verify": fleetresource.VerifyAttribute(fleetresource.VerifyDescriptions{
				Verify:   "How each cluster is verified after the revision is applied: every applied object must become ready (kstatus) within `timeout`, then the wave bakes for `bake_time` and is checked again.",
				Timeout:  "Longest wait for the objects of one cluster to become ready, as a Go duration (`\"5m\"`). Default `" + fleetresource.DefaultVerifyTimeout + "`.",
				BakeTime: "Wait after a wave is verified, before it is checked again and the next wave starts (`\"30s\"`). Default `0s`.",
			}, httpChecks, fleetresource.HealthChecks, fleetresource.ClusterGates, fleetresource.NodeGate, checkJob),
			"record_namespace": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultRecordNamespace),
				MarkdownDescription: "Namespace, in every workload cluster and in the management cluster, of the rollout's records and Lease. Default `" + defaultRecordNamespace + "`. Changing it replaces the resource.",
				Validators:          []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"deletion_policy": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultDeletionPolicy),
				MarkdownDescription: "On destroy, and for clusters that leave the rollout (relabelled out of `selector`, or removed from `names`; the plan lists them in `leaving`): `delete` removes the objects the rollout made (in waves; objects it adopted are given back, never deleted); `orphan` leaves them, handed back to the shared field manager `gradual` for whichever rollout applies them next. The records go either way. Default `delete`.",
				Validators:          []validator.String{stringvalidator.OneOf("delete", "orphan")},
			},
			"force_conflicts":        fleetresource.ForceConflictsAttribute(),
			"preview":                fleetresource.PreviewAttribute(),
			ignoreattr.Name:          ignoreattr.Attribute("`manifests` and `sensitive_manifests`"),
			ignoreattr.SensitiveName: ignoreattr.SensitiveAttribute("`manifests`", "`sensitive_manifests`"),
			"default_namespace": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Namespace for the objects of `manifests` and `sensitive_manifests` that name none, as `helm template` " +
					"and `kubectl kustomize` output often does not (like `kubectl apply -n`). Objects of cluster-scoped kinds stay " +
					"without one: the built-in ones (Namespace, ClusterRole, CRDs, webhooks, StorageClass, …) and kinds a CRD of the " +
					"bundle defines with `scope: Cluster`; other custom kinds are taken as namespaced. The namespace must exist in the " +
					"clusters or be in the bundle. Part of the `revision` (the objects carry it). Without it, a namespaced object " +
					"without a namespace fails the apply's check, before anything is applied.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
			},
			"values": fleetresource.ValuesAttribute(valuesText),
			"adopt": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Take over objects of `manifests` that already exist in a cluster, made by someone else (kubectl, Helm, …). " +
					"They are recorded as adopted before the first apply and never deleted by the rollout: a failed first revision puts them back as they were, " +
					"prune and destroy give them back to their other field managers as they are. `false` refuses, at plan time, a cluster where such an object exists. Default `true`.\n\n" +
					"Records missing: a cluster that holds no record of this rollout (its record namespace was deleted, or the cluster restored from a backup without it) " +
					"but holds objects of `manifests` under this rollout's own field manager is `records-missing` in `summary` and `attention` (with the objects found), " +
					"and apply holds it back (skipped): nothing there is applied, pruned, deleted or restored to nothing, since what runs there is unknown. " +
					"Writing `adopt = true` in the configuration (the default alone does not) is the opt-in: those objects are taken over as adopted, with their content as found, " +
					"so a failing revision puts them back as they are instead of deleting them, and prune and destroy give them back. " +
					"Through Flux the records are in the management cluster: a cluster whose records there are gone while the rollout's Kustomization for it is " +
					"still there is `records-missing` likewise (the objects found are the Kustomization's inventory); there `adopt = true` records the cluster again " +
					"on the revision apply pins, without recording the objects adopted (Flux's inventory decides what Flux prunes).",
			},
			"retry_invalid":      fleetresource.RetryInvalidAttribute(changeText),
			"paused":             pausedAttribute(),
			"maintenance_window": fleetresource.MaintenanceWindowAttribute("rollout"),
			"delivery":           fleetresource.DeliveryAttribute(),
			"follow_joins":       followJoinsAttribute,
			"bridge":             bridgeAttribute,
			"timeouts":           timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),

			"revision": schema.StringAttribute{
				Computed: true,
				MarkdownDescription: "Revision of `manifests`: a short hash of the normalized objects and of the settings that change what is applied " +
					"(`sensitive_manifests`, `values`, `ignore_fields`, `sensitive_paths`, `default_namespace`, the Flux pull settings), " +
					"known at plan time. Without those settings it is what `provider::gradual::revision(manifests)` returns.",
			},
			"backup_revision": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The revision clusters return to if this one fails: what most clusters ran before (empty on first install).",
			},
			"invalid_revisions": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "Revisions recorded invalid in the management cluster's ledger, with where and why they failed.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"revision":    schema.StringAttribute{Computed: true, MarkdownDescription: "The invalid revision."},
					"reason":      schema.StringAttribute{Computed: true, MarkdownDescription: "Why it failed."},
					"clusters":    schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Clusters where it failed."},
					"recorded_at": schema.StringAttribute{Computed: true, MarkdownDescription: "When it was recorded (RFC 3339)."},
				}},
			},
			"summary": schema.MapAttribute{
				Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "How many picked clusters are in each state: `current` (verified on `revision`), `outdated` (on another " +
					"revision, e.g. restored after a failure, or not reached yet), `drifted` (objects missing or edited), `provisioning` " +
					"(an apply stopped while changing it), `pending` (nothing applied yet), `values-changed` (with `values`: it renders differently now), `records-missing` (no record of the rollout, but objects of it under its field manager: held back, see `adopt`), `waiting` (with `stages`: not on the revision, in a stage after `promote_until` or in no stage; counted here, never listed in `attention`) and `skipped`. A plan stays readable at any fleet " +
					"size: per-cluster detail is in `attention` (clusters that need it) and in the `gradual_rollout_status` data source. " +
					"Where clusters end up depends on how apply fares, so while a plan changes anything this is known after apply.",
			},
			"attention": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The picked clusters that are not `current`, each with what is wrong: the objects and fields that " +
					"drifted, the revision it runs instead, an interrupted apply. Skipped clusters are in `skipped`. Empty when every " +
					"cluster is current, so a plan names only the clusters that matter.",
			},
			"leaving": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The clusters apply lets go of, sorted: earlier applies changed them and the selector (or `names`) " +
					"no longer picks them, as the refresh before this plan read it. Apply deletes the objects the rollout made there " +
					"(or keeps them, with `deletion_policy = \"orphan\"`) and removes its records — on these clusters and no other: " +
					"a cluster that starts leaving after the plan waits for the next plan, and one that came back since is left alone. " +
					"When the plan changes which clusters are picked, the clusters that leave because of it are listed by the next plan. " +
					"After a plan with nothing to do it keeps the last apply's list.",
			},
			"waves": schema.StringAttribute{
				Computed: true,
				MarkdownDescription: "The planned waves in one line, as counts in order, runs of the same size together and the waves of " +
					"`canary` first: `\"3 waves: 1 canary wave of 1 cluster, then 2 waves of 2 clusters\"`, `\"none\"` when there is " +
					"nothing to do. One line however many waves (a thousand clusters one at a time), so a plan stays readable. Shown at plan time, " +
					"and exactly what apply then does (the clusters of each wave are kept with the plan): a cluster that joins after " +
					"the plan waits for the next one, and one that became not ready or vanished is left out (apply warns). After a plan " +
					"with nothing to do it keeps the last apply's waves. The `Planned Waves` warning names the clusters of each wave.",
			},
			"skipped": fleetresource.SkippedAttribute("Picked clusters that this apply leaves alone, with the reason (not ready, paused, no kubeconfig…). A later apply picks them up once they are ready."),
		},
	}
}

// changeText is what the rollout says in the change attributes it shares with module assignments.
var changeText = fleetresource.ChangeText{
	Canary:   "Clusters changed first",
	Subject:  "a rollout",
	Revision: "the revision",
	OnFailure: "When failures exceed `max_failures`: `rollback` restores every cluster this apply changed to its backup revision; " +
		"`halt` leaves the clusters that succeeded. Default `rollback`.",
}

// httpChecks is `verify.http_checks`, which only rollouts have.
var httpChecks = fleetresource.VerifyExtra{
	Name:    "http_checks",
	Type:    types.ListType{ElemType: types.ObjectType{AttrTypes: httpCheckAttrTypes}},
	Default: types.ListNull(types.ObjectType{AttrTypes: httpCheckAttrTypes}),
	Attribute: schema.ListNestedAttribute{
		Optional:            true,
		MarkdownDescription: "Extra HTTP checks run from where Terraform runs after the objects are ready; `{cluster}` in the URL is replaced by the cluster name. Retried with backoff within `verify.timeout`. A check that ends with a wrong status fails the revision on that cluster, except 502, 503, 504 and 429, which a gateway or load balancer answers when it cannot reach the app or sheds load: those, like no answer at all, say nothing of the revision and leave the cluster unsettled (counted against `max_unsettled`, never recorded invalid) when they last the whole `verify.timeout`.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"url": schema.StringAttribute{
				Required: true, MarkdownDescription: "URL to GET (http or https).",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://`), "must start with http:// or https://")},
			},
			"expected_status": schema.Int64Attribute{
				Optional: true, Computed: true, Default: int64default.StaticInt64(200),
				MarkdownDescription: "HTTP status that counts as healthy. Default 200.",
				Validators:          []validator.Int64{int64validator.Between(100, 599)},
			},
			"timeout": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultHTTPCheckTimeout),
				MarkdownDescription: "Timeout of one request. Default `10s`.",
				Validators:          []validator.String{fleetresource.Duration(time.Second, 0)},
			},
		}},
	},
}

// checkJob is `verify.check_job` (delivery.CheckJob).
var checkJob = fleetresource.CheckJob("A Kubernetes Job run in each cluster at each verification, once the objects are ready and the HTTP checks pass")
