package rollout

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

var (
	pathStages       = path.Root("stages")
	pathPromoteUntil = path.Root("promote_until")
	stageNameRE      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)
)

// StageModel is one element of `stages`.
type StageModel struct {
	Name        types.String `tfsdk:"name"`
	Names       types.List   `tfsdk:"names"`
	MatchLabels types.Map    `tfsdk:"match_labels"`
	UpdateLimit types.String `tfsdk:"update_limit"`
	MaxFailures types.String `tfsdk:"max_failures"`
	BakeTime    types.String `tfsdk:"bake_time"`
}

var stageAttrTypes = map[string]attr.Type{
	"name": types.StringType, "names": types.ListType{ElemType: types.StringType}, "match_labels": types.MapType{ElemType: types.StringType},
	"update_limit": types.StringType, "max_failures": types.StringType, "bake_time": types.StringType,
}

func stagesAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional: true,
		MarkdownDescription: "Ordered steps of the rollout, after the `canary` waves: each stage's clusters go out in waves of " +
			"their own, with the stage's own `update_limit`, `max_failures` and `bake_time` (the rollout's where left out), and " +
			"a stage whose failures exceed its `max_failures` stops the apply before the next stage starts (on_failure applies). " +
			"A cluster belongs to the first stage that picks it; a picked cluster in no stage is left alone, and the plan says " +
			"how many. A stage that picks none of the rollout's clusters fails the plan. With `promote_until`, apply stops after " +
			"that stage and the plan says who waits, e.g. `stops after stage eu: 120 clusters wait for stage us`.",
		Validators: []validator.List{listvalidator.SizeAtLeast(1)},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "The stage's name, unique within the rollout (lowercase letters, digits and `-`, at most 40 characters); `promote_until` names it.",
				Validators:          []validator.String{stringvalidator.RegexMatches(stageNameRE, "lowercase letters, digits and '-', at most 40 characters, starting and ending with a letter or digit")},
			},
			"names": schema.ListAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Names of the `Cluster` objects in this stage.",
			},
			"match_labels": schema.MapAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Labels a `Cluster` must carry to be in this stage (with `names`, a cluster matching either is in it).",
			},
			"update_limit": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Most clusters of this stage changed at once, as the rollout's `update_limit` (a percentage is of the stage's eligible clusters). Default: the rollout's.",
				Validators:          []validator.String{fleetresource.UpdateLimit()},
			},
			"max_failures": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Clusters of this stage that may fail before the apply stops, as the rollout's `max_failures`. Default: the rollout's.",
				Validators:          []validator.String{fleetresource.MaxFailures()},
			},
			"bake_time": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Bake time of this stage's waves. Default: the rollout's `verify.bake_time`.",
				Validators:          []validator.String{fleetresource.Duration(0, 0)},
			},
		}},
	}
}

func promoteUntilAttribute() schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true,
		MarkdownDescription: "The last stage this apply carries the revision to (default: every stage). The clusters of later stages " +
			"wait, counted in `waves`; promoting is the reviewed change of this one line. A stage that failed blocks the next: " +
			"its clusters record the revision invalid, so the next plan refuses it until it is fixed or `retry_invalid` is set.",
	}
}

// stages reads `stages` and `promote_until` into spec: each stage's limits default to the
// rollout's, parsed already into spec.Policy. Bad input is an error on the attribute.
func (m *Model) stages(ctx context.Context, spec *delivery.Spec) diag.Diagnostics {
	var diags diag.Diagnostics
	if m.Stages.IsNull() || m.Stages.IsUnknown() {
		if until := m.PromoteUntil.ValueString(); until != "" {
			diags.AddAttributeError(pathPromoteUntil, "No Such Stage", fmt.Sprintf("promote_until = %q, but the rollout has no `stages`.", until))
		}
		return diags
	}
	var stages []StageModel
	if diags.Append(m.Stages.ElementsAs(ctx, &stages, false)...); diags.HasError() {
		return diags
	}
	seen := map[string]bool{}
	for i, st := range stages {
		at := pathStages.AtListIndex(i)
		name := st.Name.ValueString()
		if seen[name] {
			diags.AddAttributeError(at.AtName("name"), "Stage Named Twice", fmt.Sprintf("Two stages are named %q; each needs a name of its own.", name))
		}
		seen[name] = true
		s := delivery.StageSpec{Name: name, UpdateLimit: spec.Policy.UpdateLimit, MaxFailures: spec.Policy.MaxFailures, BakeTime: spec.Policy.BakeTime}
		diags.Append(st.Names.ElementsAs(ctx, &s.Names, true)...)
		diags.Append(st.MatchLabels.ElementsAs(ctx, &s.MatchLabels, true)...)
		if len(s.Names) == 0 && len(s.MatchLabels) == 0 {
			diags.AddAttributeError(at, "Stage Picks No Cluster", fmt.Sprintf("Stage %q has neither `names` nor `match_labels`: give it one or both.", name))
		}
		var err error
		if v := st.UpdateLimit.ValueString(); v != "" {
			if s.UpdateLimit, err = engine.ParseLimit(v); err != nil {
				diags.AddAttributeError(at.AtName("update_limit"), "Invalid Update Limit", err.Error())
			}
		}
		if v := st.MaxFailures.ValueString(); v != "" {
			if s.MaxFailures, err = engine.ParseMaxFailures(v); err != nil {
				diags.AddAttributeError(at.AtName("max_failures"), "Invalid Failure Budget", err.Error())
			}
		}
		if v := st.BakeTime.ValueString(); v != "" {
			if s.BakeTime, err = time.ParseDuration(v); err != nil {
				diags.AddAttributeError(at.AtName("bake_time"), "Invalid Duration", err.Error())
			}
		}
		spec.Stages = append(spec.Stages, s)
	}
	if until := m.PromoteUntil.ValueString(); until != "" && !m.PromoteUntil.IsUnknown() {
		if !seen[until] {
			diags.AddAttributeError(pathPromoteUntil, "No Such Stage", fmt.Sprintf("promote_until = %q names no stage of `stages`.", until))
		}
		spec.Policy.PromoteUntil = until
	}
	return diags
}

// storedStage is a stage as the management cluster's record keeps it (for import).
type storedStage struct {
	Name        string            `json:"name"`
	Names       []string          `json:"names,omitempty"`
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	UpdateLimit string            `json:"updateLimit,omitempty"`
	MaxFailures string            `json:"maxFailures,omitempty"`
	BakeTime    string            `json:"bakeTime,omitempty"`
}

func (m *Model) storedStages(ctx context.Context) ([]storedStage, diag.Diagnostics) {
	var diags diag.Diagnostics
	if m.Stages.IsNull() || m.Stages.IsUnknown() {
		return nil, diags
	}
	var stages []StageModel
	diags.Append(m.Stages.ElementsAs(ctx, &stages, false)...)
	out := make([]storedStage, 0, len(stages))
	for _, st := range stages {
		s := storedStage{Name: st.Name.ValueString(), UpdateLimit: st.UpdateLimit.ValueString(), MaxFailures: st.MaxFailures.ValueString(), BakeTime: st.BakeTime.ValueString()}
		diags.Append(st.Names.ElementsAs(ctx, &s.Names, true)...)
		diags.Append(st.MatchLabels.ElementsAs(ctx, &s.MatchLabels, true)...)
		out = append(out, s)
	}
	return out, diags
}

// stagesValue is `stages` from what the records kept (null for none).
func stagesValue(ctx context.Context, stored []storedStage) types.List {
	elem := types.ObjectType{AttrTypes: stageAttrTypes}
	if stored == nil {
		return types.ListNull(elem)
	}
	optional := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	vals := make([]attr.Value, 0, len(stored))
	for _, s := range stored {
		labels := types.MapNull(types.StringType)
		if s.MatchLabels != nil {
			labels, _ = types.MapValueFrom(ctx, types.StringType, s.MatchLabels)
		}
		vals = append(vals, types.ObjectValueMust(stageAttrTypes, map[string]attr.Value{
			"name": types.StringValue(s.Name), "names": stringListOrNull(ctx, s.Names), "match_labels": labels,
			"update_limit": optional(s.UpdateLimit), "max_failures": optional(s.MaxFailures), "bake_time": optional(s.BakeTime),
		}))
	}
	return types.ListValueMust(elem, vals)
}

// waiting names the clusters of obs that m's stages leave for a later promotion or in no stage
// (delivery.Spec.Waiting); nil without stages, or when they cannot be read (plan reports why).
func (m *Model) waiting(ctx context.Context, obs *delivery.Observation) map[string]bool {
	if m.Stages.IsNull() || m.Stages.IsUnknown() || obs == nil {
		return nil
	}
	var spec delivery.Spec
	if diags := m.stages(ctx, &spec); diags.HasError() {
		return nil
	}
	if diags := fleetresource.SetCanary(ctx, m.Canary, m.CanaryOptional, &spec.Policy); diags.HasError() {
		return nil
	}
	return spec.Waiting(obs.Discovery)
}
