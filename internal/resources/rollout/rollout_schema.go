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
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/validators"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/verifyattr"
)

// Defaults, shown in the schema and used when the attribute is left out.
const (
	defaultUpdateLimit      = "1"
	defaultMaxFailures      = "0"
	defaultOnFailure        = "rollback"
	defaultHTTPCheckTimeout = "10s"
	defaultRecordNamespace  = "gradual-system"
	defaultDeletionPolicy   = "delete"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

var verifyAttrTypes = verifyattr.AttrTypes(httpChecks)

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

var clusterStateAttrTypes = map[string]attr.Type{
	"revision": types.StringType,
	"state":    types.StringType,
	"backup":   types.StringType,
}

func (r *rolloutResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Rolls a revision of Kubernetes manifests out to the Cluster API clusters a selector (or a list of names) " +
			"picks, in waves of at most `update_limit` clusters, verifying after each wave that every applied object is ready. " +
			"A cluster that fails verification is restored to its backup (last good) revision and the failed revision is recorded " +
			"invalid, so later plans refuse it. `terraform plan` shows the revision, the waves, skipped clusters and every cluster " +
			"that is not on the desired revision (drift, joins, interrupted runs).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "`namespace/name`.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the rollout, unique within `namespace`; it names the records in the clusters. Changing it replaces the resource.",
				Validators:          []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(dnsLabel, "must be a DNS label: lower-case letters, digits and '-'")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"namespace": fleetattr.ResourceNamespace(),
			"selector":  fleetattr.ResourceSelector("clusters"),
			"clusters": fleetattr.ResourceNames("Names of the `Cluster` objects to roll out to, instead of `selector`. " +
				"A listed cluster that does not exist is skipped with a warning."),
			"manifests": schema.StringAttribute{
				Required: true, CustomType: manifesttype.Type{}, PlanModifiers: []planmodifier.String{manifesttype.KeepPriorOnSameRevision()},
				MarkdownDescription: "Multi-document YAML of the objects to apply to every cluster. Namespaces and CRDs are applied first. " +
					"Its normalized content names the `revision`.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1), validators.Manifests()},
			},
			"canary": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Clusters changed first, in this order, in waves of their own (still at most `update_limit` at a time).",
				Validators:          []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
			},
			"update_limit": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultUpdateLimit),
				MarkdownDescription: "Most clusters changed at once: a whole number ≥ 1 (`\"2\"`) or a percentage of the eligible clusters " +
					"from 1% to 100% (`\"25%\"`), rounded up, at least 1. Default `\"" + defaultUpdateLimit + "\"`.",
				Validators: []validator.String{validators.UpdateLimit()},
			},
			"max_failures": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMaxFailures),
				MarkdownDescription: "Clusters that may fail before no new wave starts: a whole number ≥ 0 or a percentage from 0% to 100%. Default `\"0\"`.",
				Validators:          []validator.String{validators.MaxFailures()},
			},
			"on_failure": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultOnFailure),
				MarkdownDescription: "When failures exceed `max_failures`: `rollback` restores every cluster this apply changed to its backup revision; `halt` leaves the clusters that succeeded. Default `rollback`.",
				Validators:          []validator.String{stringvalidator.OneOf("rollback", "halt")},
			},
			"verify": verifyattr.Attribute(verifyattr.Descriptions{
				Verify:   "How each cluster is verified after the revision is applied: every applied object must become ready (kstatus) within `timeout`, then the wave bakes for `bake_time` and is checked again.",
				Timeout:  "Longest wait for the objects of one cluster to become ready, as a Go duration (`\"5m\"`). Default `" + verifyattr.DefaultTimeout + "`.",
				BakeTime: "Wait after a wave is verified, before it is checked again and the next wave starts (`\"30s\"`). Default `0s`.",
			}, httpChecks),
			"record_namespace": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultRecordNamespace),
				MarkdownDescription: "Namespace, in every workload cluster and in the management cluster, of the rollout's records and Lease. Default `" + defaultRecordNamespace + "`. Changing it replaces the resource.",
				Validators:          []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"deletion_policy": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultDeletionPolicy),
				MarkdownDescription: "On destroy: `delete` removes the applied objects from every cluster (in waves); `orphan` leaves them and removes only the records. Default `delete`.",
				Validators:          []validator.String{stringvalidator.OneOf("delete", "orphan")},
			},
			"force_conflicts": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Take ownership of fields another field manager owns (server-side apply `force`). Default false: such conflicts fail the cluster.",
			},
			"retry_invalid": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Apply the revision even though it is recorded invalid (after fixing what made it fail outside the manifests). The ledger entry is cleared when the revision succeeds.",
			},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),

			"revision": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "Revision of `manifests`: a short hash of the normalized objects, known at plan time.",
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
			"cluster_states": schema.MapNestedAttribute{
				Computed: true,
				MarkdownDescription: "Per picked cluster: the `revision` it runs, its `state` (`current`, `drifted`, `provisioning` = an " +
					"interrupted run, `restored`, `pending`), and its `backup` revision. Where each cluster ends up depends on how " +
					"apply fares there (a failure within `max_failures`, a cluster that vanishes), so while a plan changes anything " +
					"this is known after apply; `waves` shows what apply will do.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"revision": schema.StringAttribute{Computed: true, MarkdownDescription: "Revision the cluster runs (empty: none)."},
					"state":    schema.StringAttribute{Computed: true, MarkdownDescription: "`current`, `drifted`, `provisioning`, `restored` or `pending`."},
					"backup":   schema.StringAttribute{Computed: true, MarkdownDescription: "Revision the cluster returns to on failure."},
				}},
			},
			"waves": schema.ListAttribute{
				Computed:    true,
				ElementType: types.ListType{ElemType: types.StringType},
				MarkdownDescription: "The planned waves: the clusters each wave changes, in order (canaries first). Shown at plan time, and " +
					"exactly what apply then does: a cluster that joins after the plan waits for the next one, and one that became " +
					"not ready or vanished is left out (apply warns). After a plan with nothing to do it keeps the last apply's waves.",
			},
			"skipped": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Picked clusters that this apply leaves alone, with the reason (not ready, paused, no kubeconfig…). A later apply picks them up once they are ready.",
			},
		},
	}
}

// httpChecks is `verify.http_checks`, which only rollouts have.
var httpChecks = verifyattr.Extra{
	Name:    "http_checks",
	Type:    types.ListType{ElemType: types.ObjectType{AttrTypes: httpCheckAttrTypes}},
	Default: types.ListNull(types.ObjectType{AttrTypes: httpCheckAttrTypes}),
	Attribute: schema.ListNestedAttribute{
		Optional:            true,
		MarkdownDescription: "Extra HTTP checks run from where Terraform runs after the objects are ready; `{cluster}` in the URL is replaced by the cluster name. Retried with backoff within `verify.timeout`.",
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
				Validators:          []validator.String{validators.Duration(time.Second, 0)},
			},
		}},
	},
}
