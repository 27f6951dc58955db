package moduleassignment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
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
// another owner manages and manifests a cluster cannot take are refused here. The steps are
// fleetresource's (Lifecycle.ModifyPlan); the assignment's own are its fleetresource.PlanSteps
// below.
func (r *assignmentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	r.Lifecycle.ModifyPlan(ctx, req, resp, r)
}

// Deletion is what destroying the assignment state removes (fleetresource.PlanSteps): without
// its private state, which says which modules each cluster is bound to, there is no count to
// warn of.
func (r *assignmentResource) Deletion(ctx context.Context, state *Model, replacing string, privateRead bool) (fleetresource.Deletion, bool) {
	return state.deletion(ctx, replacing), privateRead
}

// FromPrior refuses a mode change through Flux and carries prior's per-cluster status and bridge
// over (fleetresource.PlanSteps). The waves of an earlier plan never carry over: only this
// plan's are carried out.
func (r *assignmentResource) FromPrior(ctx context.Context, plan, prior *Model) diag.Diagnostics {
	var diags diag.Diagnostics
	refuseModeChange(plan, prior, &diags)
	if prior != nil {
		plan.private.Clusters, plan.private.Bridged = prior.private.Clusters, prior.private.Bridged
	}
	diags.Append(plan.planMove(ctx, prior)...)
	return diags
}

// ReadsWriteOnlyFirst: the modules' sensitive_manifests are read once the modules are known
// (fleetresource.PlanSteps).
func (r *assignmentResource) ReadsWriteOnlyFirst() bool { return false }

// ShowWriteOnly names the objects of the write-only manifests, never their content (fleetresource.PlanSteps).
func (r *assignmentResource) ShowWriteOnly(ctx context.Context, plan *Model) diag.Diagnostics {
	return plan.setSensitiveObjects(ctx)
}

// ContentKnown reports whether everything the plan needs is known, the write-only
// sensitive_manifests of the configuration included (fleetresource.PlanSteps).
func (r *assignmentResource) ContentKnown(ctx context.Context, plan *Model, config tfsdk.Config) bool {
	return plan.known(ctx) && !sensitiveUnknown(ctx, config)
}

// MarkContentUnknown leaves the revisions and the objects to apply (fleetresource.PlanSteps).
func (r *assignmentResource) MarkContentUnknown(plan *Model) {
	plan.Revisions = types.MapUnknown(types.StringType)
	plan.SensitiveObjects = types.MapUnknown(sensitiveObjectsType)
	plan.Objects = types.MapUnknown(objectsType)
}

// MarkObservedUnknown: see fleetresource.PlanSteps.
func (r *assignmentResource) MarkObservedUnknown(plan *Model) { plan.markObservedUnknown() }

// PlanSpec: see fleetresource.PlanSteps.
func (r *assignmentResource) PlanSpec(ctx context.Context, plan *Model) (assignment.Spec, diag.Diagnostics) {
	return plan.spec(ctx)
}

// SetContent: see fleetresource.PlanSteps.
func (r *assignmentResource) SetContent(ctx context.Context, plan *Model, spec assignment.Spec) diag.Diagnostics {
	plan.setRevisions(spec)
	return plan.setObjects(ctx, spec)
}

// Hold: an assignment is never held as a whole (fleetresource.PlanSteps).
func (r *assignmentResource) Hold(_, _ *Model, _ *diag.Diagnostics) bool { return false }

// TargetsKnown: ContentKnown covers the attributes that pick clusters (fleetresource.PlanSteps).
func (r *assignmentResource) TargetsKnown(*Model) bool { return true }

// SetPlan: see fleetresource.PlanSteps.
func (r *assignmentResource) SetPlan(ctx context.Context, plan *Model, to *tfsdk.Plan) diag.Diagnostics {
	return to.Set(ctx, plan)
}

// PlanWaves plans the assignment against the fleet as it reads now (e), shows its waves in plan
// and warns of what apply will meet (fleetresource.PlanSteps). What the bridge hands out is
// shown last, after the timeout warning.
func (r *assignmentResource) PlanWaves(ctx context.Context, plan, prior *Model, e fleetresource.Engine[assignment.Spec], configChanged bool,
	diags *diag.Diagnostics,
) (fleetresource.PlannedWaves, bool) {
	spec, query, svc := e.Spec, e.Query, e.Svc
	req := assignment.PlanRequest{Spec: spec, Query: query, Drifted: assignment.Drifted(priorClusters(prior)),
		RefuseAdoption: fleetresource.RefusesAdoption(plan.Adopt)}
	if samePick(plan, prior) {
		req.Prior, req.PriorSkipped = prior.private.Clusters, priorSkipped(ctx, prior)
	}
	res, err := assignment.Plan(ctx, svc.Planning(), req)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return fleetresource.PlannedWaves{}, false
	}
	if !warnPlan(diags, res, spec, query) {
		return fleetresource.PlannedWaves{}, false
	}
	warnRecordsMissing(diags, plannedFrom(res, prior, spec), spec.AdoptUnrecorded)
	plan.setPlanned(res, prior, configChanged, spec.Policy.Canary, diags)
	warnMove(diags, svc, res.Observation)
	if len(res.Plan.Apply) > 0 && !warnFluxArtifacts(diags, svc, spec, res) {
		return fleetresource.PlannedWaves{}, false
	}
	planned := fleetresource.PlannedWaves{Policy: spec.Policy}
	for _, w := range res.Waves {
		planned.Waves += len(w) // the modules' waves run one module after the other
	}
	planBridge(ctx, &planned.Later, svc, plan, prior, spec, query, res.Observation)
	return planned, true
}

// warnFluxArtifacts shows the artifact each module res applies would be published as, so that
// the plan names what Flux will pull (nothing when the engine pins nothing). It reports false
// when an artifact cannot be built.
func warnFluxArtifacts(diags *diag.Diagnostics, svc *delivery.Service, spec assignment.Spec, res *assignment.PlanResult) bool {
	names, artifacts, err := assignment.Pinned(svc, spec, slices.Collect(maps.Keys(res.Plan.Apply)))
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Build The Flux Artifact"))
		return false
	}
	lines := make([]string, len(names))
	for i, name := range names {
		lines[i] = fleetresource.FluxArtifactLine(name, artifacts[i])
	}
	if len(lines) > 0 {
		fleetresource.WarnFluxArtifacts(diags, lines)
	}
	return true
}

// warnPlan shows what a plan found (res) as diagnostics: refusals as errors on the attribute
// they name, the rest as warnings. It reports whether the plan may go on.
func warnPlan(diags *diag.Diagnostics, res *assignment.PlanResult, spec assignment.Spec, query fleet.Query) bool {
	obs, planned := res.Observation, res.Plan
	for _, v := range res.Invalid {
		e, _ := usererr.As(v.Err)
		if v.Kept {
			diags.AddAttributeWarning(pathModules.AtListIndex(v.Index), e.Summary, e.Detail)
		} else {
			diags.AddAttributeError(pathModules.AtListIndex(v.Index), e.Summary, e.Detail)
		}
	}
	if diags.HasError() {
		return false
	}
	if w := assignment.KeptOldWarning(planned, spec); w != "" {
		diags.AddWarning("Clusters Keep An Older Module Version", w)
	}
	if len(obs.Skipped) > 0 {
		diags.AddWarning("Clusters Skipped", fleetresource.SkippedDetail(skippedIntro, obs.Skipped))
	}
	if len(res.Leaving) > 0 {
		what := "loses its modules (deletion_policy = \"delete\")"
		if spec.Orphan {
			what = "keeps its objects, but its records and bindings are removed (deletion_policy = \"orphan\")"
		}
		diags.AddAttributeWarning(path.Root("leaving"), "Clusters No Longer Match",
			fmt.Sprintf("These clusters are no longer picked (by the selector, or `names`); each %s: %s", what, fleetresource.ShortList(res.Leaving, 20)))
	}
	if len(res.LeavingLater) > 0 {
		diags.AddAttributeWarning(path.Root("leaving"), "Clusters Leaving After This Apply",
			fmt.Sprintf("These clusters hold bindings but are no longer picked as the fleet reads now: %s. This apply leaves them "+
				"alone (they were picked as the refresh read the fleet, or this plan changes the clusters picked); the next plan lists them in `leaving`.",
				fleetresource.ShortList(res.LeavingLater, 20)))
	}
	if len(obs.Eligible) == 0 && len(obs.Skipped) == 0 {
		diags.AddWarning("No Clusters Picked",
			fmt.Sprintf("No Cluster in namespace %q is picked by %s, so apply changes nothing there. Clusters that match later get the modules on a later apply.", query.Namespace, spec.Key.Describe()))
	}
	if res.Refused != nil {
		diags.Append(diagnostics.AttributeFromError(path.Root(res.Refused.Attribute), res.Refused.Err, "Assignment Refused"))
		return false
	}
	// What the dry-run found, as for a rollout: a warning, never a promise in the state.
	if text := assignment.PreviewText(res.Previews); text != "" {
		diags.AddWarning("Dry-Run Preview", text)
	}
	if len(res.Adoptions) > 0 {
		diags.AddAttributeWarning(pathModules, "Objects Will Be Adopted",
			"These objects of the modules exist already, made by someone else; apply takes them over and records them as adopted, "+
				"so the assignment never deletes them (a failed first revision puts them back as they are now; removal gives them back):\n  "+
				delivery.DescribeFound(res.Adoptions, 20))
	}
	return true
}

// setPlanned sets the attributes apply carries out (`waves`, `leaving`) from res, and leaves
// to apply those that depend on how each cluster fares.
func (m *Model) setPlanned(res *assignment.PlanResult, prior *Model, configChanged bool, canary []string, diags *diag.Diagnostics) {
	planned, waves, leaving := res.Plan, res.Waves, res.Leaving
	switch {
	case !res.FromState:
		m.markOutcomeUnknown()
		m.Waves = types.MapUnknown(wavesType)
		m.setLeaving(nil)
		if planned.Changes() {
			if summary := wavesSummary(waves); summary != "" {
				diags.AddWarning("Planned Waves", summary+
					"\n\nThese are the waves as the fleet reads now; apply reads it again (a create, or a change of the clusters picked, "+
					"has no earlier state to plan from), so `waves` is known after apply.")
			}
		}
	case planned.Changes() || configChanged:
		// What apply will do is `waves`, which it carries out as planned here (their clusters go
		// to apply in private state). Where the clusters end up depends on how each fares, so
		// summary, attention and skipped are known only after apply: a promise here would make a
		// failure within max_failures an inconsistent result.
		m.markOutcomeUnknown()
		m.setWaves(waves, canary)
		m.private.PlannedWaves = waves
		m.setLeaving(leaving)
		m.private.PlannedLeaving = append([]string{}, leaving...)
		if summary := wavesSummary(waves); summary != "" {
			diags.AddWarning("Planned Waves", summary)
		}
	default:
		// Nothing to do: everything stays as the last refresh read it, including the waves of
		// the last apply (rather than a diff to {}).
		m.copyComputed(prior)
	}
}

// samePick reports whether plan picks the clusters prior picked, under the same
// maintenance_window (the refresh judged the windows by the prior one), and prior holds what a
// plan can work from (the per-cluster status of the last refresh or apply).
func samePick(plan, prior *Model) bool {
	if prior == nil || prior.private.Clusters == nil || prior.Skipped.IsUnknown() || prior.Skipped.IsNull() {
		return false
	}
	return plan.Name.Equal(prior.Name) && plan.Namespace.Equal(prior.Namespace) && plan.Selector.Equal(prior.Selector) &&
		plan.Names.Equal(prior.Names) && plan.RecordNamespace.Equal(prior.RecordNamespace) && plan.MaintenanceWindow.Equal(prior.MaintenanceWindow)
}

func priorClusters(prior *Model) []assignment.ClusterStatus {
	if prior == nil {
		return nil
	}
	return prior.private.Clusters
}

// plannedFrom is the per-cluster status res was planned from: the refresh's (prior), or, without
// a state to plan from, the fleet's as the plan read it. Its records-missing clusters are the
// ones the plan held back.
func plannedFrom(res *assignment.PlanResult, prior *Model, spec assignment.Spec) []assignment.ClusterStatus {
	if !res.FromState {
		return assignment.Status(res.Observation, spec)
	}
	return priorClusters(prior)
}

func priorSkipped(ctx context.Context, prior *Model) map[string]string {
	out := map[string]string{}
	_ = prior.Skipped.ElementsAs(ctx, &out, false)
	return out
}

// known reports whether everything the plan needs is known.
func (m *Model) known(ctx context.Context) bool {
	return !m.Namespace.IsUnknown() && !m.Name.IsUnknown() && !m.Selector.IsUnknown() && !m.Names.IsUnknown() && !m.Modules.IsUnknown() &&
		!m.Canary.IsUnknown() && !m.CanaryOptional.IsUnknown() && !m.OnFailure.IsUnknown() && !m.ForceConflicts.IsUnknown() && !m.RetryInvalid.IsUnknown() &&
		!m.Mode.IsUnknown() && !m.Preview.IsUnknown() && !m.UpdateLimit.IsUnknown() && !m.MaxFailures.IsUnknown() && !m.Verify.IsUnknown() &&
		!m.RecordNamespace.IsUnknown() && !m.DeletionPolicy.IsUnknown() && m.modulesKnown() && ignoreattr.Known(m.IgnoreFields) &&
		ignoreattr.Known(m.SensitivePaths) && fleetresource.ValuesKnown(ctx, m.Values) && !m.Delivery.IsUnknown()
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
			fmt.Fprintf(&b, "  wave %d: %s\n", i+1, fleetresource.ShortList(wave, shown))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// warnRecordsMissing names the clusters the plan found records-missing for a module
// (assignment.StateRecordsMissing): the plan leaves them out of that module's waves, as its run
// holds such a cluster back (assignment.Plan.Held), or,
// with adopt = true written in the configuration, takes the module's objects over there.
func warnRecordsMissing(diags *diag.Diagnostics, clusters []assignment.ClusterStatus, adopt bool) {
	var lines []string
	for _, cs := range clusters {
		if cs.State == assignment.StateRecordsMissing {
			lines = append(lines, cs.Name+": "+cs.Detail)
		}
	}
	if len(lines) == 0 {
		return
	}
	what := "Apply holds the module back on these clusters (skipped, its binding kept): nothing of it there is applied, pruned, " +
		"deleted or restored to nothing. Set adopt = true in the configuration to take the objects over as pre-existing."
	if adopt {
		what = "adopt = true is set in the configuration: apply takes these objects over as pre-existing, so a failed revision puts them back instead of deleting them."
	}
	diags.AddAttributeWarning(path.Root("adopt"), "Records Missing",
		"These clusters hold objects of a module under its field manager but no record of it, so what runs there is unknown:\n  "+
			strings.Join(lines, "\n  ")+"\n\n"+what)
}
