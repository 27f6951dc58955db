package moduleassignment

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// ValidateConfig refuses duplicate module names, unknown depends_on names and cycles before
// anything is read or applied.
func (r *assignmentResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m Model
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Modules.IsNull() || m.Modules.IsUnknown() {
		return
	}
	mods, diags := m.modules(ctx)
	if diags.HasError() {
		return
	}
	var list []assignment.Module
	for _, mm := range mods {
		if mm.Name.IsUnknown() || mm.DependsOn.IsUnknown() {
			return
		}
		mod := assignment.Module{Name: mm.Name.ValueString()}
		resp.Diagnostics.Append(mm.DependsOn.ElementsAs(ctx, &mod.DependsOn, true)...)
		list = append(list, mod)
	}
	if _, err := assignment.Order(list); err != nil {
		resp.Diagnostics.AddAttributeError(pathModules, "Invalid Modules",
			err.Error()+". Module names must be unique, and depends_on may name only other modules of this assignment, without cycles.")
	}
}

// ModifyPlan shows at plan time what apply will do: per cluster, the bindings it will have.
// Joins, leaves, module changes and drift make the plan an update; invalid revisions, objects
// another owner manages and manifests a cluster cannot take are refused here.
func (r *assignmentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	warnDeletion(ctx, req, &resp.Diagnostics)
	// A formatting-only edit of manifests leaves nothing changed (see manifesttype).
	if restored, ok := manifesttype.RestorePrior(req.Plan.Raw, req.Config.Raw, req.State.Raw); ok {
		req.Plan.Raw, resp.Plan.Raw = restored, restored
	}
	plan, prior, ok := shared.PlanAndPrior[Model](ctx, req, resp)
	if !ok {
		return
	}
	if prior != nil {
		resp.Diagnostics.Append(prior.LoadPrivate(ctx, req.Private)...)
	}
	// The waves of an earlier plan never carry over: only this plan's are carried out.
	if prior != nil {
		plan.private.Clusters = prior.private.Clusters
	}
	defer func() { resp.Diagnostics.Append(plan.SavePrivate(ctx, resp.Private)...) }()
	// Terraform proposes the prior state unchanged when the configuration did not change.
	configChanged := prior == nil || !req.Plan.Raw.Equal(req.State.Raw)
	if !plan.Namespace.IsUnknown() && !plan.Name.IsUnknown() {
		plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	}
	if !plan.known() || sensitiveUnknown(ctx, req.Config) {
		plan.markObservedUnknown()
		plan.SensitiveObjects = types.MapUnknown(sensitiveObjectsType)
		plan.Objects = types.MapUnknown(objectsType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	// Write-only: in the configuration only; the framework leaves it null in the plan.
	resp.Diagnostics.Append(plan.ReadWriteOnly(ctx, req.Config)...)
	resp.Diagnostics.Append(plan.setSensitiveObjects(ctx)...)
	spec, diags := plan.spec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.setRevisions(spec)
	resp.Diagnostics.Append(plan.setObjects(ctx, spec)...)
	if r.Data == nil {
		revisions := plan.Revisions
		plan.markObservedUnknown()
		plan.Revisions = revisions
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	query, diags := plan.query(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	svc := r.Data.Delivery
	obs, err := assignment.Observe(ctx, svc, query, spec, false)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	// Terraform plans again when it applies (with the same configuration and prior state) and
	// rejects any value this plan showed that comes out different. So the waves are worked out
	// from the prior state — the refresh that preceded this plan, kept in private state — and
	// the configuration, never from a fresh read of a fleet that may change before apply. On
	// create, or when the configuration picks other clusters, that cannot be done: the waves are
	// then known after apply, and a warning shows them as the fleet reads now.
	var planned assignment.Plan
	fromState := samePick(&plan, prior)
	if fromState {
		planned = assignment.PlanAssignment(assignment.ObservationFrom(prior.private.Clusters, priorSkipped(ctx, prior), spec), spec,
			assignment.Drifted(prior.private.Clusters))
		// The clusters let go of are the ones the refresh found leaving (ObservationFrom), so that
		// the final plan at apply comes out the same; bindings of deleted Clusters are dropped by
		// apply as it finds them (nothing is left there to change), not planned.
		planned.Gone = nil
	} else {
		planned = assignment.PlanAssignment(obs, spec, assignment.Drifted(priorClusters(prior)))
	}
	for i, m := range spec.Modules {
		if len(planned.Apply[m.Name]) == 0 {
			continue
		}
		if entry, ok := obs.Modules[m.Name].Invalid(m.Revision); ok {
			report := resp.Diagnostics.AddAttributeError
			if delivery.RunsRevision(obs.Modules[m.Name].Targets, m.Revision) {
				// Clusters run it already (it failed elsewhere within max_failures): it stays
				// where it runs and goes nowhere else, instead of failing every later plan.
				report = resp.Diagnostics.AddAttributeWarning
				delete(planned.Apply, m.Name)
			}
			refusal := delivery.InvalidRefusal(fmt.Sprintf("module %s (version %s) of %s", m.Name, m.Version, spec.Key.Describe()),
				m.Revision, spec.RecordNamespace, entry, false)
			report(pathModules.AtListIndex(i), refusal.Summary, refusal.Detail)
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if w := assignment.KeptOldWarning(planned, spec); w != "" {
		resp.Diagnostics.AddWarning("Clusters Keep An Older Module Version", w)
	}
	if len(obs.Skipped) > 0 {
		resp.Diagnostics.AddWarning("Clusters Skipped", shared.SkippedDetail(skippedIntro, obs.Skipped))
	}
	var leaving []string
	if fromState {
		leaving = planned.Leaving
	}
	if len(leaving) > 0 {
		what := "loses its modules (deletion_policy = \"delete\")"
		if spec.Orphan {
			what = "keeps its objects, but its records and bindings are removed (deletion_policy = \"orphan\")"
		}
		resp.Diagnostics.AddAttributeWarning(path.Root("leaving"), "Clusters No Longer Match",
			fmt.Sprintf("These clusters no longer match the selector; each %s: %s", what, shared.ShortList(leaving, 20)))
	}
	if later := slices.DeleteFunc(slices.Clone(obs.Leaving), func(n string) bool { return slices.Contains(leaving, n) }); len(later) > 0 {
		resp.Diagnostics.AddAttributeWarning(path.Root("leaving"), "Clusters Leaving After This Apply",
			fmt.Sprintf("These clusters hold bindings but no longer match the selector as the fleet reads now: %s. This apply leaves them "+
				"alone (they matched as the refresh read the fleet, or this plan changes the selector); the next plan lists them in `leaving`.",
				shared.ShortList(later, 20)))
	}
	if len(obs.Eligible) == 0 && len(obs.Skipped) == 0 {
		resp.Diagnostics.AddWarning("No Clusters Picked",
			fmt.Sprintf("The selector of %s picks no Cluster in namespace %q, so apply changes nothing there. Clusters that match later get the modules on a later apply.", spec.Key.Describe(), query.Namespace))
	}
	// The clusters to check are the planned ones the fleet still offers: one that became
	// unreachable since the refresh is left out by apply, with a warning, not refused here.
	checked := onlyEligible(planned.Apply, obs.Eligible)
	if err := assignment.CheckClaims(ctx, svc, spec, checked); err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(pathModules, err, "Object Claimed By Two Owners"))
		return
	}
	if err := assignment.CheckManifests(ctx, svc, spec, checked); err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(pathModules, err, "Manifests Cannot Be Applied"))
		return
	}
	if found, err := assignment.Adoptions(ctx, svc, spec, checked); err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	} else if len(found) > 0 && !plan.Adopt.IsUnknown() && !plan.Adopt.IsNull() && !plan.Adopt.ValueBool() {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(path.Root("adopt"), delivery.AdoptRefused(found, spec.Key.Describe()), "Objects Exist Already"))
		return
	} else if len(found) > 0 {
		resp.Diagnostics.AddAttributeWarning(pathModules, "Objects Will Be Adopted",
			"These objects of the modules exist already, made by someone else; apply takes them over and records them as adopted, "+
				"so the assignment never deletes them (a failed first revision puts them back as they are now; removal gives them back):\n  "+
				delivery.DescribeFound(found, 20))
	}
	waves := assignment.Waves(planned, spec)
	switch {
	case !fromState:
		plan.markOutcomeUnknown()
		plan.Waves = types.MapUnknown(wavesType)
		plan.setLeaving(nil)
		if planned.Changes() {
			if summary := wavesSummary(waves); summary != "" {
				resp.Diagnostics.AddWarning("Planned Waves", summary+
					"\n\nThese are the waves as the fleet reads now; apply reads it again (a create, or a change of the clusters picked, "+
					"has no earlier state to plan from), so `waves` is known after apply.")
			}
		}
	case planned.Changes() || configChanged:
		// What apply will do is `waves`, which it carries out as planned here (their clusters go
		// to apply in private state). Where the clusters end up depends on how each fares, so
		// summary, attention and skipped are known only after apply: a promise here would make a
		// failure within max_failures an inconsistent result.
		plan.markOutcomeUnknown()
		plan.setWaves(waves)
		plan.private.PlannedWaves = waves
		plan.setLeaving(leaving)
		plan.private.PlannedLeaving = append([]string{}, leaving...)
		if summary := wavesSummary(waves); summary != "" {
			resp.Diagnostics.AddWarning("Planned Waves", summary)
		}
	default:
		// Nothing to do: everything stays as the last refresh read it, including the waves of
		// the last apply (rather than a diff to {}).
		plan.copyComputed(prior)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// samePick reports whether plan picks the clusters prior picked, and prior holds what a plan
// can work from (the per-cluster status of the last refresh or apply).
func samePick(plan, prior *Model) bool {
	if prior == nil || prior.private.Clusters == nil || prior.Skipped.IsUnknown() || prior.Skipped.IsNull() {
		return false
	}
	return plan.Name.Equal(prior.Name) && plan.Namespace.Equal(prior.Namespace) && plan.Selector.Equal(prior.Selector) &&
		plan.RecordNamespace.Equal(prior.RecordNamespace)
}

func priorClusters(prior *Model) []assignment.ClusterStatus {
	if prior == nil {
		return nil
	}
	return prior.private.Clusters
}

func priorSkipped(ctx context.Context, prior *Model) map[string]string {
	out := map[string]string{}
	_ = prior.Skipped.ElementsAs(ctx, &out, false)
	return out
}

// onlyEligible returns apply without the clusters not in eligible.
func onlyEligible(apply map[string][]string, eligible []string) map[string][]string {
	ok := map[string]bool{}
	for _, c := range eligible {
		ok[c] = true
	}
	out := map[string][]string{}
	for m, clusters := range apply {
		for _, c := range clusters {
			if ok[c] {
				out[m] = append(out[m], c)
			}
		}
	}
	return out
}

// known reports whether everything the plan needs is known.
func (m *Model) known() bool {
	return !m.Namespace.IsUnknown() && !m.Name.IsUnknown() && !m.Selector.IsUnknown() && !m.Modules.IsUnknown() &&
		!m.Mode.IsUnknown() && !m.UpdateLimit.IsUnknown() && !m.MaxFailures.IsUnknown() && !m.Verify.IsUnknown() &&
		!m.RecordNamespace.IsUnknown() && !m.DeletionPolicy.IsUnknown() && m.modulesKnown() && ignoreattr.Known(m.IgnoreFields) &&
		ignoreattr.Known(m.SensitivePaths)
}

func (m *Model) modulesKnown() bool {
	for _, v := range m.Modules.Elements() {
		o, ok := v.(types.Object)
		if !ok || o.IsUnknown() {
			return false
		}
		for _, a := range o.Attributes() {
			if a.IsUnknown() {
				return false
			}
		}
	}
	return true
}

const skippedIntro = "These clusters are left alone by this apply; a later apply gives them the modules once they are ready:"

// wavesSummary names, per module, the clusters of each wave, compactly at any fleet size; ""
// when there are none.
func wavesSummary(waves map[string][][]string) string {
	const shown = 10
	modules := make([]string, 0, len(waves))
	for m := range waves {
		modules = append(modules, m)
	}
	sort.Strings(modules)
	var b strings.Builder
	for _, m := range modules {
		n := 0
		for _, w := range waves[m] {
			n += len(w)
		}
		fmt.Fprintf(&b, "module %s → %d cluster(s) in %d wave(s):\n", m, n, len(waves[m]))
		for i, wave := range waves[m] {
			if i == shown {
				fmt.Fprintf(&b, "  … and %d more wave(s)\n", len(waves[m])-shown)
				break
			}
			fmt.Fprintf(&b, "  wave %d: %s\n", i+1, shared.ShortList(wave, shown))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
