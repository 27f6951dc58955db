package inplaceupdate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// The fleet form is planned and carried out by fleetupdate; this file maps the model to its
// Spec and its results back to attributes and diagnostics.

// fleetService is the fleet in-place update service of the provider's management cluster.
func fleetService(data *providerdata.Data) *fleetupdate.Service {
	return data.FleetUpdate
}

// fleetSpec converts the fleet form's inputs. Attribute errors point at what is wrong.
func (in *Input) fleetSpec(ctx context.Context, limits fleetLimits) (fleetupdate.Spec, diag.Diagnostics) {
	var diags diag.Diagnostics
	var spec fleetupdate.Spec
	var d diag.Diagnostics
	spec.Change, spec.Fallback, spec.Endpoints, d = in.change(ctx)
	diags.Append(d...)
	spec.Owners, d = in.owners(ctx)
	diags.Append(d...)
	spec.Policy, d = limits.policy(ctx)
	diags.Append(d...)
	names := in.Names
	if !in.Cluster.IsNull() {
		names = types.ListValueMust(types.StringType, []attr.Value{in.Cluster})
	}
	spec.Query, d = fleetresource.Query(ctx, in.Namespace, in.Selector, names)
	diags.Append(d...)
	return spec, diags
}

// owners converts the owner-picking inputs of the fleet form.
func (in *Input) owners(ctx context.Context) (owners.Pick, diag.Diagnostics) {
	var diags diag.Diagnostics
	o := owners.Pick{ControlPlane: in.UpdateControlPlane.ValueBool()}
	if !in.MachineDeploymentSelector.IsNull() {
		ls, d := fleetresource.ToLabelSelector(ctx, in.MachineDeploymentSelector)
		diags.Append(d...)
		sel, err := ls.Selector()
		if err != nil {
			diags.AddAttributeError(path.Root("machine_deployment_selector"), "Invalid Selector", err.Error())
		}
		if sel == nil {
			sel = labels.Everything()
		}
		o.MachineDeployments = sel
	}
	switch {
	case !in.MachineDeployment.IsNull() || !in.ControlPlane.IsNull():
		diags.AddAttributeError(path.Root("machine_deployment"), "Owner Named Across Clusters",
			"machine_deployment and control_plane name one owner of one `cluster`; owner names differ from cluster to cluster. "+
				"With names or selector, pick owners with machine_deployment_selector and/or update_control_plane = true.")
	case !o.ControlPlane && o.MachineDeployments == nil:
		diags.AddAttributeError(path.Root("machine_deployment_selector"), "No Owner Selected",
			"Set machine_deployment_selector (the MachineDeployments of each cluster, by label; {} for all) and/or update_control_plane = true.")
	}
	return o, diags
}

// fleetLimits are the pacing attributes.
type fleetLimits struct {
	UpdateLimit, MaxFailures types.String
	Canary                   types.List
	VerifyTimeout            time.Duration
}

func (l fleetLimits) policy(ctx context.Context) (engine.Policy, diag.Diagnostics) {
	var diags diag.Diagnostics
	p := engine.Policy{Irreversible: true, OnFailure: engine.Halt, VerifyTimeout: l.VerifyTimeout}
	var err error
	if p.UpdateLimit, err = engine.ParseLimit(orDefault(l.UpdateLimit, "1")); err != nil {
		diags.AddAttributeError(path.Root("update_limit"), "Invalid Update Limit", err.Error())
	}
	if p.MaxFailures, err = engine.ParseMaxFailures(orDefault(l.MaxFailures, "0")); err != nil {
		diags.AddAttributeError(path.Root("max_failures"), "Invalid Failure Budget", err.Error())
	}
	if !l.Canary.IsNull() && !l.Canary.IsUnknown() {
		diags.Append(l.Canary.ElementsAs(ctx, &p.Canary, false)...)
	}
	if err := p.Validate(); err != nil {
		diags.AddError("Invalid Pacing", err.Error())
	}
	return p, diags
}

func orDefault(v types.String, def string) string {
	if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
		return def
	}
	return v.ValueString()
}

// limits are the model's pacing attributes.
func (m *Model) limits(verify time.Duration) fleetLimits {
	return fleetLimits{UpdateLimit: m.UpdateLimit, MaxFailures: m.MaxFailures, Canary: m.Canary, VerifyTimeout: verify}
}

// fleetID names a fleet update by what it picks: the namespace and a short hash of the cluster
// and owner selection.
func (m *Model) fleetID() types.String {
	var b strings.Builder
	for _, v := range m.pick() {
		b.WriteString(v.String())
		b.WriteByte(0)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return types.StringValue(m.Namespace.ValueString() + "/fleet:" + hex.EncodeToString(sum[:])[:12])
}

// pick are the attributes that choose the clusters and owners.
func (m *Model) pick() []attr.Value {
	return []attr.Value{m.Cluster, m.Names, m.Selector, m.MachineDeploymentSelector, m.UpdateControlPlane}
}

// priorForPlan is what the refresh before this plan recorded of the picked clusters, when plan
// picks the same clusters and owners as prior; nil otherwise (see fleetupdate.Prior).
func priorForPlan(plan, prior *Model) *fleetupdate.Prior {
	if prior == nil || prior.private.Clusters == nil || !plan.Namespace.Equal(prior.Namespace) {
		return nil
	}
	now := plan.pick()
	for i, v := range prior.pick() {
		if !v.Equal(now[i]) {
			return nil
		}
	}
	return &fleetupdate.Prior{Revision: prior.Revision.ValueString(), Clusters: prior.private.Clusters}
}

// fleetError is err as a diagnostic on the attribute that fixes it.
func fleetError(err error, fallbackSummary string, in *Input) diag.Diagnostic {
	switch {
	case errors.Is(err, fleetupdate.ErrCanary):
		return diagnostics.AttributeFromError(path.Root("canary"), err, fallbackSummary)
	case errors.Is(err, fleetupdate.ErrMissing) && !in.Cluster.IsNull():
		return diagnostics.AttributeFromError(path.Root("cluster"), err, fallbackSummary)
	case errors.Is(err, fleetupdate.ErrMissing):
		return diagnostics.AttributeFromError(path.Root("names"), err, fallbackSummary)
	}
	return diagnostics.FromError(err, fallbackSummary)
}

func blockedDetail(err error) string {
	return inplace.BlockedLead + ":\n" + indent(err.Error()) +
		"\nTerraform plans again when it applies: if this comes from applying a plan that showed these machines in place, " +
		"that plan is stale (an extension was removed or answers differently now, or Cluster API's InPlaceUpdates feature gate was turned off). Nothing was written; plan again."
}

// planFleet plans a fleet update (PlanKnown of the fleet form). What Terraform keeps from the plan is a pure function
// of the configuration and the refreshed state: the revision, and the waves when the state
// picks the same clusters (their clusters go to apply in private state). What only live reads
// can tell (the extensions' preview: machines in place or replaced, the summary and attention
// built from it) is shown as warnings and known after apply, so that a fleet that changes
// between `plan -out` and `apply` cannot make the plans differ. A plan that changes nothing
// keeps the state's computed attributes, so it is empty. false ends the plan unset.
func (r *updateResource) planFleet(ctx context.Context, plan, prior *Model, diags *diag.Diagnostics) bool {
	verify, d := plan.verifyTimeout(ctx)
	diags.Append(d...)
	spec, d := plan.fleetSpec(ctx, plan.limits(verify))
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	res, err := fleetService(r.Data).Plan(ctx, spec, priorForPlan(plan, prior))
	if err != nil {
		diags.Append(fleetError(err, "In-Place Update Plan Failed", &plan.Input))
		return false
	}
	for _, n := range res.Notes {
		diags.AddWarning("In-Place Update Plan", n)
	}
	if res.Blocked != nil {
		diags.AddAttributeError(path.Root("fallback"), inplace.BlockedSummary, blockedDetail(res.Blocked))
		return false
	}
	if len(res.Skipped) > 0 {
		diags.AddWarning("Clusters Skipped", fleetresource.SkippedDetail("These picked clusters are left alone by this apply; a later apply updates them once they can be:", res.Skipped))
	}
	if len(res.Drifted) > 0 {
		diags.AddWarning("Topology Variables Changed Outside Terraform", fleetresource.SkippedDetail(
			"These clusters no longer hold the topology variables the last apply wrote (found by the refresh); this apply writes them again, in the waves below:", res.Drifted))
	}
	if len(res.Missing) > 0 {
		diags.AddWarning("Clusters Gone", fmt.Sprintf("No Cluster %s any more in namespace %q: left out of this apply.", strings.Join(res.Missing, ", "), spec.Query.Namespace))
	}
	for _, n := range res.Plan.Notes {
		tflog.Info(ctx, "in-place plan: "+n)
	}
	plan.Revision = types.StringValue(res.Revision)
	if !res.Plan.Changes() && prior != nil && prior.Revision.ValueString() == res.Revision && !prior.Summary.IsNull() {
		plan.Plan, plan.Status, plan.Summary, plan.Attention, plan.Waves = prior.Plan, prior.Status, prior.Summary, prior.Attention, prior.Waves
		if res.FromState {
			// An update of the pacing alone: apply carries out these (no) waves, not the fleet
			// as it reads then.
			plan.private.PlannedWaves = nonNilWaves(res.Plan.Waves)
		}
		return true
	}
	plan.Plan = types.ListNull(types.ObjectType{AttrTypes: machineAttrTypes})
	plan.Status, plan.Summary, plan.Attention = types.MapUnknown(types.StringType), types.MapUnknown(types.Int64Type), types.MapUnknown(types.StringType)
	plan.private.Strategies = res.Strategies
	if res.FromState {
		plan.Waves = types.StringValue(fleetresource.WavesText(fleetresource.WaveSizes(res.Plan.Waves), res.Plan.CanaryWaves))
		plan.private.PlannedWaves = nonNilWaves(res.Plan.Waves)
		if res.Plan.Changes() {
			diags.AddWarning("Planned Waves", res.Plan.WavesText("each cluster's owners one after the other, each verified before the next"))
		}
	} else {
		plan.Waves = types.StringUnknown()
		if res.Plan.Changes() {
			diags.AddWarning("Planned Waves", res.Plan.WavesText("each cluster's owners one after the other, each verified before the next")+
				"\n\nThese are the waves as the fleet reads now; apply reads it again (a create, or a change of the clusters picked, "+
				"has no refreshed state to plan from), so `waves` is known after apply.")
		}
	}
	if res.Plan.Changes() {
		diags.AddWarning("In-Place Preview", previewDetail(res))
	}
	return true
}

// previewDetail is the extensions' preview as a warning: the machine counts and the clusters to
// look at. It is what they answer now; apply asks them again before each wave and stops a wave
// whose answer got worse.
func previewDetail(res *fleetupdate.PlanResult) string {
	sum, att := fleetupdate.Summarize(res.Live, res.Plan)
	var b strings.Builder
	fmt.Fprintf(&b, "As the extensions answer now: %d machine(s) updated in place, %d replaced by Cluster API, %d unchanged "+
		"(`summary` and `attention` are known after apply; apply previews each wave again and stops one whose preview got worse).",
		sum[fleetupdate.SumInPlace], sum[fleetupdate.SumRolling], sum[fleetupdate.SumUnchanged])
	if len(att) > 0 {
		b.WriteString("\n" + fleetresource.SkippedDetail("Clusters to look at:", att))
	}
	return b.String()
}

func nonNilWaves(waves [][]string) [][]string {
	if waves == nil {
		return [][]string{}
	}
	return waves
}

// applyFleet carries out the planned waves through fleetupdate and fills the computed
// attributes with what was done.
func (r *updateResource) applyFleet(ctx context.Context, plan *Model, verify time.Duration, diags *diag.Diagnostics) {
	spec, d := plan.fleetSpec(ctx, plan.limits(verify))
	diags.Append(d...)
	planned := plan.private
	// What apply leaves in private state is read again by the next refresh.
	plan.private = fleetPrivate{}
	if diags.HasError() {
		plan.fillUnknown()
		return
	}
	res, err := fleetService(r.Data).Apply(ctx, fleetupdate.ApplyRequest{Spec: spec, Planned: planned.PlannedWaves, Strategies: planned.Strategies,
		Exec: ownerupdate.ExecuteRequest{
			VerifyTimeout: verify,
			Logf:          func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
			Holder:        records.HolderIdentity(),
		}})
	if err != nil {
		diags.Append(fleetError(err, "In-Place Update Not Started", &plan.Input))
		plan.fillUnknown()
		return
	}
	if len(res.Differences) > 0 {
		diags.AddWarning("Apply Differs From The Plan", "Clusters that changed since the plan are left alone and show in the next plan:\n"+indent(strings.Join(res.Differences, "\n")))
	}
	if plan.Summary.IsUnknown() || plan.Attention.IsUnknown() {
		sum, att := fleetupdate.Summarize(res.Live, res.Plan)
		plan.Summary, d = types.MapValueFrom(ctx, types.Int64Type, sum)
		diags.Append(d...)
		plan.Attention, d = types.MapValueFrom(ctx, types.StringType, att)
		diags.Append(d...)
	}
	if plan.Waves.IsUnknown() {
		plan.Waves = types.StringValue(fleetresource.WavesText(fleetresource.WaveSizes(res.Plan.Waves), res.Plan.CanaryWaves))
	}
	if plan.Revision.IsUnknown() {
		plan.Revision = types.StringValue(res.Revision)
	}
	if plan.Status.IsUnknown() {
		plan.Status, d = types.MapValueFrom(ctx, types.StringType, res.Status)
		diags.Append(d...)
	}
	if plan.Plan.IsUnknown() {
		plan.Plan = types.ListNull(types.ObjectType{AttrTypes: machineAttrTypes})
	}
	if err := res.Err(); err != nil {
		var failed []string
		for _, o := range res.Result.Outcomes {
			if o.Error != "" {
				failed = append(failed, fmt.Sprintf("cluster %s (%s): %s", o.Target, o.Status, o.Error))
			}
		}
		diags.AddError("In-Place Update Failed", fmt.Sprintf("%s.\n%s\n\nNothing is rolled back: Cluster API goes on with what was written. "+
			"Clusters not started are left for the next apply, which also verifies the failed ones again.", err, indent(strings.Join(failed, "\n"))))
	}
}

// readFleet is Refresh of the fleet form: the machines' status, and in state.private (which Read
// saves in private state) what the next plan cuts its waves from.
func (r *updateResource) readFleet(ctx context.Context, state *Model, diags *diag.Diagnostics) bool {
	prior := map[string]string{}
	if !state.Status.IsNull() && !state.Status.IsUnknown() {
		diags.Append(state.Status.ElementsAs(ctx, &prior, false)...)
	}
	spec, d := state.fleetSpec(ctx, state.limits(0))
	if d.HasError() {
		diags.AddError("Cannot Read Machines", fmt.Sprintf("The state's selection cannot be read: %v", d))
		return false
	}
	got, err := fleetService(r.Data).Refresh(ctx, spec, prior)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read Machines"))
		return false
	}
	for _, n := range got.Notes {
		diags.AddWarning("In-Place Update Not Fully Refreshed", n)
	}
	state.Status, d = types.MapValueFrom(ctx, types.StringType, got.Status)
	diags.Append(d...)
	state.private = fleetPrivate{Clusters: got.Clusters}
	return true
}
