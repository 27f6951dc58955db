package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// ModifyPlan shows at plan time what apply will do: the revision, the waves (as counts; their
// clusters go to apply in private state), the skipped clusters, and a summary by state with the
// clusters needing attention. Clusters not on the desired revision
// (drift, joins, restored clusters, interrupted runs) make the plan an update even when the
// configuration is unchanged. A revision in the invalid ledger is refused here.
func (r *rolloutResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	// A formatting-only edit of manifests leaves nothing changed (see manifesttype).
	if restored, ok := manifesttype.RestorePrior(req.Plan.Raw, req.Config.Raw, req.State.Raw); ok {
		req.Plan.Raw, resp.Plan.Raw = restored, restored
	}
	plan, prior, ok := planAndPrior(ctx, req, resp)
	if !ok {
		return
	}
	defer func() { resp.Diagnostics.Append(plan.SavePrivate(ctx, resp.Private)...) }()
	// Write-only: in the configuration only. Plan.Set below (setPlan) leaves it null again.
	resp.Diagnostics.Append(plan.ReadWriteOnly(ctx, req.Config)...)
	resp.Diagnostics.Append(plan.setSensitiveObjects(ctx)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Terraform proposes the prior state unchanged when the configuration did not change.
	configChanged := prior == nil || !req.Plan.Raw.Equal(req.State.Raw)
	if !plan.Namespace.IsUnknown() && !plan.Name.IsUnknown() {
		plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	}
	if !plan.contentKnown(ctx) {
		plan.Revision = types.StringUnknown()
		plan.Objects = types.MapUnknown(manifesttype.ObjectsType)
		r.markObservedUnknown(&plan)
		resp.Diagnostics.Append(setPlan(ctx, resp, plan)...)
		return
	}
	spec, diags := plan.spec(ctx)
	resp.Diagnostics.Append(diags...)
	// At plan only: a state that has them already must still be destroyable.
	resp.Diagnostics.Append(plan.refuseWithFlux()...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Revision = types.StringValue(spec.Revision)
	resp.Diagnostics.Append(plan.setObjects(ctx, spec.Objects)...)
	if plan.isPaused() {
		plan.planPaused(prior, &resp.Diagnostics)
		resp.Diagnostics.Append(setPlan(ctx, resp, plan)...)
		return
	}
	if r.Data == nil || !plan.knownTargets() {
		// The provider connects later, or the clusters depend on other resources: show what is
		// known and let apply work out the rest.
		r.markObservedUnknown(&plan)
		resp.Diagnostics.Append(setPlan(ctx, resp, plan)...)
		return
	}
	r.planFleet(ctx, resp, &plan, prior, spec, configChanged)
}

// planAndPrior reads the plan and the prior state (nil on create), warns of a deletion (destroy,
// or a replacement when the identity changes), and starts the plan's private state from the
// prior's. ok is false when there is nothing to plan, or the diagnostics hold an error.
func planAndPrior(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) (_ Model, _ *Model, ok bool) {
	if req.Plan.Raw.IsNull() && !req.State.Raw.IsNull() {
		var state Model
		if diags := req.State.Get(ctx, &state); !diags.HasError() {
			state.LoadPrivate(ctx, req.Private)
			fleetresource.WarnDeletion(&resp.Diagnostics, state.deletion(""))
		}
	}
	plan, prior, ok := fleetresource.PlanAndPrior[Model](ctx, req, resp)
	if !ok {
		return plan, prior, false
	}
	if prior != nil {
		resp.Diagnostics.Append(prior.LoadPrivate(ctx, req.Private)...)
		if changed := identityChange(&plan, prior); changed != "" {
			fleetresource.WarnDeletion(&resp.Diagnostics, prior.deletion(changed))
		}
	}
	// The waves and leaving clusters of an earlier plan never carry over: only this plan's are
	// carried out.
	plan.private = privateState{Clusters: priorClusters(prior)}
	if prior != nil {
		plan.private.Leaving, plan.private.Bridged = prior.private.Leaving, prior.private.Bridged
	}
	var diags diag.Diagnostics
	plan.private.MovingFrom, diags = movingFrom(ctx, &plan, prior)
	resp.Diagnostics.Append(diags...)
	return plan, prior, !resp.Diagnostics.HasError()
}

// contentKnown reports whether what makes the revision is known at plan time: the manifests,
// the default namespace, the field rules and the values.
func (m *Model) contentKnown(ctx context.Context) bool {
	return !m.Manifests.IsUnknown() && !m.Sensitive.IsUnknown() && !m.DefaultNamespace.IsUnknown() && ignoreattr.Known(m.IgnoreFields) &&
		ignoreattr.Known(m.SensitivePaths) && fleetresource.ValuesKnown(ctx, m.Values)
}

// planFleet plans the waves against the fleet as it reads now, shows them in plan, warns of
// what apply will meet, and sets the plan. spec is plan's; configChanged says the configuration
// changed since prior.
func (r *rolloutResource) planFleet(ctx context.Context, resp *resource.ModifyPlanResponse, plan, prior *Model, spec delivery.Spec, configChanged bool) {
	query, svc, ok := r.PlanEngine(ctx, plan, &resp.Diagnostics)
	if !ok {
		return
	}
	claimsIgnored := r.replacedBy(spec.Key, plan, prior)
	// The waves are planned from the prior state when the configuration picks the same
	// clusters (see delivery.Prior); without it, a warning shows them as the fleet reads now.
	priorState := priorForPlan(ctx, plan, prior)
	res, err := svc.Plan(ctx, delivery.PlanRequest{Spec: spec, Query: query, Prior: priorState, Drifted: priorDrift(prior),
		IgnoreClaims: claimsIgnored, RefuseAdoption: fleetresource.RefusesAdoption(plan.Adopt)})
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	if !warnPlan(ctx, &resp.Diagnostics, plan, res, spec, query, prior == nil && claimsIgnored == nil) {
		return
	}
	plan.setPlanned(res, prior, configChanged, &resp.Diagnostics)
	warnMove(&resp.Diagnostics, svc, len(res.Observation.Moving))
	if res.Plan.Changes() {
		artifact, err := svc.Pinned(spec)
		if err != nil {
			resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Build The Flux Artifact"))
			return
		}
		if artifact != nil {
			fleetresource.WarnFluxArtifacts(&resp.Diagnostics, []string{fleetresource.FluxArtifactLine("", *artifact)})
		}
	}
	fleetresource.WarnWavesOutlast(ctx, &resp.Diagnostics, plan.Timeouts, prior == nil, len(res.Plan.Waves), spec.Policy)
	planBridge(ctx, &resp.Diagnostics, svc, plan, prior, spec, query, res.Observation)
	resp.Diagnostics.Append(setPlan(ctx, resp, *plan)...)
}

// warnPlan shows what a plan found (res) as diagnostics: a refusal as an error on the attribute
// it names, the rest as warnings. create says the plan creates the rollout (and replaces
// none). It reports whether the plan may go on.
func warnPlan(ctx context.Context, diags *diag.Diagnostics, plan *Model, res *delivery.PlanResult, spec delivery.Spec, query fleet.Query, create bool) bool {
	obs, planned := res.Observation, res.Plan
	warnMissing(diags, obs)
	if skipped := obs.SkippedRecords(); len(skipped) > 0 {
		diags.AddWarning("Records Not Read",
			"These Secrets carry this rollout's record labels but were not read: too large, unreadable, naming another rollout, or written by someone other than the provider. "+
				"The rollout never decodes, changes or deletes them; look at who wrote them: "+fleetresource.ShortList(skipped, 20))
	}
	if res.Exists && create {
		// A create of a rollout some state holds: refused by apply, unless this plan replaces it
		// under the same name (`-replace`, a taint), whose destroy goes first and removes its
		// records. A plan cannot tell the two apart, so it warns.
		diags.AddAttributeWarning(path.Root("name"), "Rollout Already Exists",
			"Unless this plan replaces it (terraform apply -replace, or a tainted resource), apply will refuse to create it. "+
				delivery.AlreadyManaged(spec.Key.Describe(), importHint(spec.Key)).Error())
	}
	if res.Refused != nil {
		diags.Append(diagnostics.AttributeFromError(path.Root(res.Refused.Attribute), res.Refused.Err, "Rollout Refused"))
		return false
	}
	if e, ok := usererr.As(res.InvalidKept); ok {
		diags.AddAttributeWarning(pathManifests, e.Summary, e.Detail+
			"\n\nThe clusters already running it keep it; it is applied to no other cluster.")
	}
	for _, note := range planned.Notes {
		tflog.Info(ctx, "plan: "+note, map[string]any{"rollout": spec.Key.String(), "revision": spec.Revision})
	}
	if len(planned.UnknownCanaries) > 0 {
		diags.AddAttributeWarning(path.Root("canary"), "Canary Clusters Not Picked",
			fmt.Sprintf("The canary clusters %s are not among the clusters this rollout picks; canary_optional is set, so they are ignored.", strings.Join(planned.UnknownCanaries, ", ")))
	}
	if len(obs.Skipped) > 0 {
		diags.AddWarning("Clusters Skipped", fleetresource.SkippedDetail(skippedIntro, obs.Skipped))
	}
	if len(obs.Clusters) == 0 && len(obs.Skipped) == 0 {
		diags.AddWarning("No Clusters Picked",
			fmt.Sprintf("The selector (or names) of %s picks no Cluster in namespace %q, so apply changes nothing. Clusters that match later are rolled out to by a later apply.", spec.Key.Describe(), query.Namespace))
	}
	if len(res.Adoptions) > 0 {
		diags.AddAttributeWarning(pathManifests, "Objects Will Be Adopted",
			"These objects of the manifests exist already, made by someone else; apply takes them over and records them as adopted, "+
				"so the rollout never deletes them (a failed first revision puts them back as they are now; prune and destroy give them back):\n  "+
				delivery.DescribeFound(res.Adoptions, 20))
	}
	if obs.Interrupted != nil {
		diags.AddWarning("Earlier Apply Did Not Finish", obs.Interrupted.String())
	}
	warnRecordsMissing(diags, obs, spec.AdoptUnrecorded)
	// What the dry-run found: counts, and by name only the clusters needing attention. It goes
	// in a warning, not in `attention`, which is known only after apply while a plan changes
	// anything (see setPlanned): the plan promises only what apply can keep.
	if text := res.Preview.Text(); text != "" {
		diags.AddWarning("Dry-Run Preview", text)
	}
	warnLeaving(diags, plan, res.Leaving, obs)
	return true
}

// setPlanned sets the attributes apply carries out (`waves`, `leaving`) from res, and leaves
// to apply those that depend on how each cluster fares.
func (m *Model) setPlanned(res *delivery.PlanResult, prior *Model, configChanged bool, diags *diag.Diagnostics) {
	planned, leaving := res.Plan, res.Leaving
	switch {
	case !res.FromState:
		m.markOutcomeUnknown()
		m.Waves = types.StringUnknown()
		m.setLeaving(nil)
		if planned.Changes() {
			diags.AddWarning("Planned Waves", planned.WavesText("")+
				"\n\nThese are the waves as the fleet reads now; apply reads it again (a create, or a change of the clusters picked, "+
				"has no earlier state to plan from), so `waves` is known after apply.")
		}
	case planned.Changes() || configChanged || len(leaving) > 0:
		// What apply will do is `waves`, which it carries out as planned here (the clusters of
		// each wave go to apply in private state), and `leaving`, the clusters the refresh
		// before this plan found leaving. What it leads to depends on how each cluster fares,
		// so it is known only after apply: promising it here is what made Terraform call a
		// failure within max_failures an inconsistent result.
		m.markOutcomeUnknown()
		m.setWaves(planned)
		m.private.PlannedWaves = nonNilWaves(planned.Waves)
		m.setLeaving(leaving)
		m.private.PlannedLeaving = nonNilNames(leaving)
		if planned.Changes() {
			diags.AddWarning("Planned Waves", planned.WavesText(""))
		}
	default:
		// Nothing to roll out: everything stays as the last refresh read it, including the
		// waves of the last apply (rather than a diff to []).
		m.copyComputed(prior)
	}
}

// priorForPlan returns what the prior state recorded (the per-cluster records in private
// state, `skipped`, the clusters found leaving and `invalid_revisions`, as the refresh before
// this plan read them) when plan picks the same clusters as prior, under the same
// maintenance_window (the refresh judged the windows by the prior one); nil when there is no
// such state.
func priorForPlan(ctx context.Context, plan, prior *Model) *delivery.Prior {
	if prior == nil || prior.private.Clusters == nil || prior.Skipped.IsUnknown() {
		return nil
	}
	for _, same := range []bool{
		plan.Name.Equal(prior.Name), plan.Namespace.Equal(prior.Namespace), plan.Selector.Equal(prior.Selector),
		plan.Clusters.Equal(prior.Clusters), plan.Names.Equal(prior.Names), plan.RecordNamespace.Equal(prior.RecordNamespace),
		plan.MaintenanceWindow.Equal(prior.MaintenanceWindow),
	} {
		if !same {
			return nil
		}
	}
	skipped := map[string]string{}
	if !prior.Skipped.IsNull() {
		if diags := prior.Skipped.ElementsAs(ctx, &skipped, false); diags.HasError() {
			return nil
		}
	}
	clusters := make(map[string]delivery.ClusterState, len(prior.private.Clusters))
	for name, st := range prior.private.Clusters {
		clusters[name] = delivery.ClusterState{Revision: st.Revision, State: st.State, Backup: st.Backup, Drift: st.Found}
	}
	return &delivery.Prior{Clusters: clusters, Skipped: skipped, Leaving: prior.private.Leaving, Invalid: priorInvalid(ctx, prior)}
}

// priorClusters returns prior's per-cluster records, or nil.
func priorClusters(prior *Model) map[string]clusterRecord {
	if prior == nil {
		return nil
	}
	return prior.private.Clusters
}

func nonNilNames(names []string) []string {
	if names == nil {
		return []string{}
	}
	return names
}

// importHint is the import command (and block) for one that exists already.
func importHint(key records.Key) string { return fleetresource.ImportHint("gradual_rollout", key) }

func nonNilWaves(waves [][]string) [][]string {
	if waves == nil {
		return [][]string{}
	}
	return waves
}

// priorInvalid returns the revisions the prior state's invalid_revisions lists.
func priorInvalid(ctx context.Context, prior *Model) []string {
	if prior.InvalidRevisions.IsNull() || prior.InvalidRevisions.IsUnknown() {
		return nil
	}
	var entries []struct {
		Revision   types.String `tfsdk:"revision"`
		Reason     types.String `tfsdk:"reason"`
		Clusters   types.List   `tfsdk:"clusters"`
		RecordedAt types.String `tfsdk:"recorded_at"`
	}
	if diags := prior.InvalidRevisions.ElementsAs(ctx, &entries, false); diags.HasError() {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Revision.ValueString())
	}
	return out
}

// knownTargets reports whether the attributes that pick clusters are known at plan time.
func (m *Model) knownTargets() bool {
	return !m.Namespace.IsUnknown() && !m.Selector.IsUnknown() && !m.Clusters.IsUnknown() && !m.Names.IsUnknown() && !m.RecordNamespace.IsUnknown() &&
		!m.Canary.IsUnknown() && !m.UpdateLimit.IsUnknown() && !m.MaxFailures.IsUnknown() && !m.Verify.IsUnknown() && !m.OnFailure.IsUnknown() &&
		!m.Stages.IsUnknown() && !m.PromoteUntil.IsUnknown()
}

func (r *rolloutResource) markObservedUnknown(m *Model) {
	m.markOutcomeUnknown()
	m.Waves = types.StringUnknown()
	// Apply lets go of no cluster this plan could not list; the next plan lists them.
	m.setLeaving(nil)
}

// markOutcomeUnknown leaves the attributes that depend on apply's outcome to apply.
func (m *Model) markOutcomeUnknown() {
	m.BackupRevision = types.StringUnknown()
	m.InvalidRevisions = types.ListUnknown(types.ObjectType{AttrTypes: invalidRevisionAttrTypes})
	m.Summary = types.MapUnknown(types.Int64Type)
	m.Attention = types.MapUnknown(types.StringType)
	m.Skipped = types.MapUnknown(types.StringType)
}

// copyComputed keeps prior's computed attributes, for a plan that changes nothing.
func (m *Model) copyComputed(prior *Model) {
	m.BackupRevision, m.InvalidRevisions, m.Summary, m.Attention, m.Skipped, m.Waves, m.Leaving =
		prior.BackupRevision, prior.InvalidRevisions, prior.Summary, prior.Attention, prior.Skipped, prior.Waves, prior.Leaving
}

// priorDrift returns the clusters the last refresh found drifted, or rendering differently
// now (values-changed): both are applied again.
func priorDrift(prior *Model) map[string]bool {
	out := map[string]bool{}
	for name, st := range priorClusters(prior) {
		if st.State == delivery.StateDrifted || st.State == delivery.StateValuesChanged {
			out[name] = true
		}
	}
	return out
}

const skippedIntro = "These clusters are left alone by this apply; a later apply picks them up once they are ready:"

func warnMissing(diags *diag.Diagnostics, obs *delivery.Observation) {
	if obs.Discovery != nil && len(obs.Discovery.Missing) > 0 {
		diags.AddAttributeWarning(path.Root("clusters"), "Clusters Not Found",
			"No Cluster named "+strings.Join(obs.Discovery.Missing, ", ")+" exists; they are skipped.")
	}
}

// setPlan sets the planned state; the write-only `sensitive_manifests` stays null in it, as
// Terraform requires (it checks that no write-only value reaches a plan).
func setPlan(ctx context.Context, resp *resource.ModifyPlanResponse, plan Model) diag.Diagnostics {
	plan.Sensitive = types.StringNull()
	return resp.Plan.Set(ctx, &plan)
}

// identityChange names the attributes that make plan a replacement of prior ("" if none): they
// name the records, so a change is a destroy and a create.
func identityChange(plan, prior *Model) string {
	return fleetresource.IdentityChange(fleetresource.Identity{Name: plan.Name, Namespace: plan.Namespace, RecordNamespace: plan.RecordNamespace},
		fleetresource.Identity{Name: prior.Name, Namespace: prior.Namespace, RecordNamespace: prior.RecordNamespace})
}

// deletion is what destroying the rollout m (a state) removes: the objects of its bundle from
// every cluster that runs a revision of it. Sensitive objects are counted by sensitive_objects,
// as the state never holds their content.
func (m *Model) deletion(replacing string) fleetresource.Deletion {
	d := fleetresource.Deletion{What: "rollout " + m.Namespace.ValueString() + "/" + m.Name.ValueString(),
		Orphan: m.DeletionPolicy.ValueString() == "orphan", Replacing: replacing}
	if set, err := manifest.Parse(m.Manifests.ValueString()); err == nil {
		d.Objects = len(set.Objects)
	}
	if !m.SensitiveObjects.IsNull() && !m.SensitiveObjects.IsUnknown() {
		d.Objects += len(m.SensitiveObjects.Elements())
	}
	for _, st := range m.private.Clusters {
		if st.Revision != "" {
			d.Clusters++
		}
	}
	d.Objects *= d.Clusters
	return d
}

// replacedBy returns the claim filter for plan (key): claims held by the rollout it replaces do not
// count. Nil when it replaces none. The rename is noted with the provider, as Terraform plans
// the create of a replacement in a second call without the prior state.
func (r *rolloutResource) replacedBy(key records.Key, plan, prior *Model) func(records.Key) bool {
	if prior != nil && identityChange(plan, prior) != "" {
		r.Data.Replacements.Note(key, records.Key{Kind: "rollout", Namespace: prior.Namespace.ValueString(), Name: prior.Name.ValueString()})
	}
	priorKey, ok := r.Data.Replacements.Of(key)
	if !ok {
		return nil
	}
	return func(k records.Key) bool { return k == priorKey }
}

// warnRecordsMissing names the clusters whose records of the rollout are gone while its objects
// are there (delivery.StateRecordsMissing): held back, or, with adopt = true written in the
// configuration, taken over as pre-existing. A warning, because `attention` is known only after
// apply while a plan changes anything; the refresh's `attention` says the same.
func warnRecordsMissing(diags *diag.Diagnostics, obs *delivery.Observation, adopt bool) {
	missing := obs.RecordsMissing()
	if len(missing) == 0 {
		return
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(missing)) {
		lines = append(lines, name+": "+missing[name])
	}
	what := "Apply holds these clusters back (skipped): nothing there is applied, pruned, deleted or restored to nothing, " +
		"so what runs there stays. Recreate the records by taking the objects over: set adopt = true in the configuration " +
		"(adopted objects are never deleted: a failed revision puts them back as they are now, prune and destroy give them back)."
	if adopt {
		what = "adopt = true is set in the configuration: apply takes these objects over as pre-existing (recorded adopted, " +
			"with their content as found), so a failed revision puts them back instead of deleting them."
	}
	diags.AddAttributeWarning(path.Root("adopt"), "Records Missing",
		"These clusters hold objects of this rollout under its field manager but no record of it, so what runs there is unknown:\n  "+
			strings.Join(lines, "\n  ")+"\n\n"+what)
}
