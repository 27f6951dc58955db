// checkjob.go: `verify.check_job`, a batch/v1 Job run in each cluster at each verification
// (delivery.CheckJob), as rollouts and module assignments have it: its schema, reading it,
// its refusal with Flux, and how the records keep it for import. One definition for both.

package fleetresource

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// DefaultCheckJobTimeout is the default of `verify.check_job.timeout`.
const DefaultCheckJobTimeout = "5m"

// CheckJobAttrTypes are the attribute types of `verify.check_job`.
var CheckJobAttrTypes = map[string]attr.Type{"manifest": types.StringType, "timeout": types.StringType}

// PathCheckJob is `verify.check_job`, where its plan-time errors point.
var PathCheckJob = path.Root("verify").AtName("check_job")

// CheckJobModel is `verify.check_job`.
type CheckJobModel struct {
	Manifest types.String `tfsdk:"manifest"`
	Timeout  types.String `tfsdk:"timeout"`
}

// CheckJob is `verify.check_job` for a resource's `verify`; when says when it runs (the
// resource's wording, the start of the description).
func CheckJob(when string) VerifyExtra {
	return VerifyExtra{
		Name:    "check_job",
		Type:    types.ObjectType{AttrTypes: CheckJobAttrTypes},
		Default: types.ObjectNull(CheckJobAttrTypes),
		Attribute: schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: when + ": the cluster passes when the Job completes. A Job that fails (its `Failed` condition: " +
				"`backoffLimit`, `activeDeadlineSeconds`, …) or does not finish within `timeout` (or `verify.timeout`) fails the revision " +
				"on that cluster, named with the condition's reason and message; a Job the cluster refuses to create or cannot read is the " +
				"cluster's failure, retried within `verify.timeout`. The Job is deleted when it is done, whatever the outcome, its pods with " +
				"it (what it said is in the failure); one left by an interrupted run is deleted before the next is created. Restored backup " +
				"revisions are not checked. With a rollout's `delivery.flux` the Job goes into each revision's artifact instead, named " +
				"`<name>-<first 8 characters of the revision>`, with `timeout` as its `activeDeadlineSeconds` unless it sets one, and " +
				"kustomize-controller waits for it with the revision's other objects: it starts with them, not after them (have it " +
				"retry until what it checks answers), runs once per revision, and stays until the next revision prunes it; a change " +
				"of it is a new revision. Refused for a module assignment with `delivery.flux`.",
			Attributes: map[string]schema.Attribute{
				"manifest": schema.StringAttribute{
					Required: true,
					MarkdownDescription: "The Job as YAML: one `batch/v1` `Job` with `metadata.name` and `metadata.namespace` (a namespace the " +
						"manifests have or the cluster already holds). With `values` it is a template like the manifests: each cluster's Job " +
						"has that cluster's variables substituted, and a variable a cluster lacks (without a default) fails the plan, naming " +
						"the cluster and the variable.",
					Validators: []validator.String{checkJobValidator},
				},
				"timeout": schema.StringAttribute{
					Optional: true, Computed: true, Default: stringdefault.StaticString(DefaultCheckJobTimeout),
					MarkdownDescription: "Longest wait for the Job to finish, as a Go duration. Default `" + DefaultCheckJobTimeout + "`.",
					Validators:          []validator.String{Duration(time.Second, 0)},
				},
			},
		},
	}
}

// CheckJobOf reads `verify.check_job` (nil when left out or not known yet); refuseFlux refuses it
// (a module assignment through Flux: its Job runs after the last of the cluster's modules, and
// each module is a Kustomization of its own). A rollout's goes into its artifact through Flux.
func CheckJobOf(ctx context.Context, v types.Object, refuseFlux bool) (*delivery.CheckJob, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	if refuseFlux {
		var diags diag.Diagnostics
		diags.AddAttributeError(PathCheckJob, "Check Job Not Delivered Through Flux Yet",
			"A module assignment's `verify.check_job` runs in each cluster after the last of the modules delivered there, and "+
				"with `delivery.flux` each module is a Kustomization of its own, none of which is last: the two cannot be used "+
				"together yet. Deliver directly (leave `delivery` out), or give the check Job to a `gradual_rollout`, which "+
				"delivers it through Flux in its artifact.")
		return nil, diags
	}
	var cj CheckJobModel
	diags := VerifyAs(ctx, v, &cj)
	if cj.Manifest.IsUnknown() || diags.HasError() {
		return nil, diags
	}
	job, err := delivery.ParseCheckJob(cj.Manifest.ValueString())
	if err != nil {
		diags.AddAttributeError(PathCheckJob.AtName("manifest"), "Invalid Check Job", err.Error())
		return nil, diags
	}
	return &delivery.CheckJob{Job: job, Timeout: ParseDuration(cj.Timeout, DefaultCheckJobTimeout)}, diags
}

// StoredCheckJob is `verify.check_job` as the records keep it (for import).
type StoredCheckJob struct {
	Manifest string `json:"manifest"`
	Timeout  string `json:"timeout"`
}

// StoreCheckJob is v as the records keep it; nil when left out.
func StoreCheckJob(ctx context.Context, v types.Object) (*StoredCheckJob, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var cj CheckJobModel
	diags := VerifyAs(ctx, v, &cj)
	return &StoredCheckJob{Manifest: cj.Manifest.ValueString(), Timeout: cj.Timeout.ValueString()}, diags
}

// Value is j as the attribute's value (null for nil).
func (j *StoredCheckJob) Value() types.Object {
	if j == nil {
		return types.ObjectNull(CheckJobAttrTypes)
	}
	return types.ObjectValueMust(CheckJobAttrTypes, map[string]attr.Value{"manifest": types.StringValue(j.Manifest), "timeout": types.StringValue(j.Timeout)})
}

// checkJobValidator checks `verify.check_job.manifest` at plan time (delivery.ParseCheckJob).
var checkJobValidator = stringFunc{
	description: "must be one batch/v1 Job with metadata.name and metadata.namespace",
	summary:     "Invalid Check Job",
	named:       true,
	check: func(s string) error {
		_, err := delivery.ParseCheckJob(s)
		return err
	},
}
