package rollout

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/glue"
)

// ModifyPlan shows at plan time what apply will do: the revision, the waves, the skipped
// clusters and, per cluster, the revision it will run. Clusters not on the desired revision
// (drift, joins, restored clusters, interrupted runs) make the plan an update even when the
// configuration is unchanged. A revision in the invalid ledger is refused here.
func (r *rolloutResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	plan, prior, ok := glue.PlanAndPrior[Model](ctx, req, resp)
	if !ok {
		return
	}
	// Terraform proposes the prior state unchanged when the configuration did not change.
	configChanged := prior == nil || !req.Plan.Raw.Equal(req.State.Raw)
	if !plan.Namespace.IsUnknown() && !plan.Name.IsUnknown() {
		plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	}
	if plan.Manifests.IsUnknown() {
		plan.Revision = types.StringUnknown()
		r.markObservedUnknown(&plan)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	spec, diags := plan.spec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Revision = types.StringValue(spec.Revision)
	if r.Data == nil || !plan.knownTargets() {
		// The provider connects later, or the clusters depend on other resources: show what is
		// known and let apply work out the rest.
		r.markObservedUnknown(&plan)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	query, diags := plan.query(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	obs, err := r.Data.Delivery.Observe(ctx, query, spec.Key, spec.RecordNamespace, false)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	warnMissing(&resp.Diagnostics, obs)
	targets := delivery.MarkDrifted(obs.Targets, priorDrift(ctx, prior))
	if entry, ok := obs.Invalid(spec.Revision); ok && !spec.Retry {
		if !delivery.RunsRevision(targets, spec.Revision) {
			resp.Diagnostics.AddAttributeError(pathManifests, "Revision Recorded Invalid", invalidDetail(spec, entry))
			return
		}
		// Clusters run it already (it failed elsewhere within max_failures): keep it where it
		// runs, and take it nowhere else.
		resp.Diagnostics.AddAttributeWarning(pathManifests, "Revision Recorded Invalid", invalidDetail(spec, entry)+
			"\n\nThe clusters already running it keep it; it is applied to no other cluster.")
		targets = delivery.RefuseRevision(targets, spec.Revision)
	}
	planned := engine.PlanRollout(targets, spec.Revision, spec.Policy)
	for _, note := range planned.Notes {
		tflog.Info(ctx, "plan: "+note, map[string]any{"rollout": spec.Key.String(), "revision": spec.Revision})
	}
	if len(planned.UnknownCanaries) > 0 {
		resp.Diagnostics.AddAttributeWarning(path.Root("canary"), "Canary Clusters Not Picked",
			fmt.Sprintf("The canary clusters %s are not among the clusters this rollout picks (or are skipped); they are ignored.", strings.Join(planned.UnknownCanaries, ", ")))
	}
	if len(obs.Skipped) > 0 {
		resp.Diagnostics.AddWarning("Clusters Skipped", glue.SkippedDetail(skippedIntro, obs.Skipped))
	}
	if len(obs.Clusters) == 0 && len(obs.Skipped) == 0 {
		resp.Diagnostics.AddWarning("No Clusters Picked",
			fmt.Sprintf("The selector (or names) of %s picks no Cluster in namespace %q, so apply changes nothing. Clusters that match later are rolled out to by a later apply.", spec.Key.Describe(), query.Namespace))
	}

	var changing []string
	for _, wave := range planned.Waves {
		changing = append(changing, wave...)
	}
	if err := r.Data.Delivery.Check(ctx, spec, changing); err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(pathManifests, err, "Manifests Cannot Be Applied"))
		return
	}
	if obs.Interrupted != nil {
		resp.Diagnostics.AddWarning("Earlier Apply Did Not Finish", obs.Interrupted.String())
	}
	switch {
	case planned.Changes() || configChanged:
		// What apply will do is `waves`, which it carries out as shown. What it leads to
		// depends on how each cluster fares, so it is known only after apply: promising it here
		// is what made Terraform call a failure within max_failures an inconsistent result.
		plan.markOutcomeUnknown()
		resp.Diagnostics.Append(plan.setWaves(ctx, planned.Waves)...)
	default:
		// Nothing to roll out: everything stays as the last refresh read it, including the
		// waves of the last apply (rather than a diff to []).
		plan.copyComputed(prior)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// knownTargets reports whether the attributes that pick clusters are known at plan time.
func (m *Model) knownTargets() bool {
	return !m.Namespace.IsUnknown() && !m.Selector.IsUnknown() && !m.Clusters.IsUnknown() && !m.RecordNamespace.IsUnknown() &&
		!m.Canary.IsUnknown() && !m.UpdateLimit.IsUnknown() && !m.MaxFailures.IsUnknown() && !m.Verify.IsUnknown() && !m.OnFailure.IsUnknown()
}

func (r *rolloutResource) markObservedUnknown(m *Model) {
	m.markOutcomeUnknown()
	m.Waves = types.ListUnknown(types.ListType{ElemType: types.StringType})
}

// markOutcomeUnknown leaves the attributes that depend on apply's outcome to apply.
func (m *Model) markOutcomeUnknown() {
	m.BackupRevision = types.StringUnknown()
	m.InvalidRevisions = types.ListUnknown(types.ObjectType{AttrTypes: invalidRevisionAttrTypes})
	m.ClusterStates = types.MapUnknown(types.ObjectType{AttrTypes: clusterStateAttrTypes})
	m.Skipped = types.MapUnknown(types.StringType)
}

// copyComputed keeps prior's computed attributes, for a plan that changes nothing.
func (m *Model) copyComputed(prior *Model) {
	m.BackupRevision, m.InvalidRevisions, m.ClusterStates, m.Skipped, m.Waves =
		prior.BackupRevision, prior.InvalidRevisions, prior.ClusterStates, prior.Skipped, prior.Waves
}

// priorDrift returns the clusters the last refresh found drifted.
func priorDrift(ctx context.Context, prior *Model) map[string]bool {
	out := map[string]bool{}
	if prior == nil || prior.ClusterStates.IsNull() || prior.ClusterStates.IsUnknown() {
		return out
	}
	states := map[string]struct {
		Revision types.String `tfsdk:"revision"`
		State    types.String `tfsdk:"state"`
		Backup   types.String `tfsdk:"backup"`
	}{}
	if diags := prior.ClusterStates.ElementsAs(ctx, &states, false); diags.HasError() {
		return out
	}
	for name, st := range states {
		if st.State.ValueString() == delivery.StateDrifted {
			out[name] = true
		}
	}
	return out
}

func invalidDetail(spec delivery.Spec, entry delivery.InvalidRevision) string {
	return fmt.Sprintf("Revision %s of %s was recorded invalid at %s after it failed on %s:\n\n  %s\n\n"+
		"The ledger lives in the management cluster (namespace %q), so it holds across lost or replaced state. "+
		"Change the manifests (a new revision), or, once what made it fail is fixed outside the manifests, "+
		"set retry_invalid = true to apply this revision again on purpose.",
		spec.Revision, spec.Key.Describe(), entry.RecordedAt.UTC().Format("2006-01-02T15:04:05Z"), strings.Join(entry.Clusters, ", "),
		entry.Reason, spec.RecordNamespace)
}

const skippedIntro = "These clusters are left alone by this apply; a later apply picks them up once they are ready:"

func warnMissing(diags *diag.Diagnostics, obs *delivery.Observation) {
	if obs.Discovery != nil && len(obs.Discovery.Missing) > 0 {
		diags.AddAttributeWarning(path.Root("clusters"), "Clusters Not Found",
			"No Cluster named "+strings.Join(obs.Discovery.Missing, ", ")+" exists; they are skipped.")
	}
}
