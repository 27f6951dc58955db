package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// The rollout's own steps of its plan (fleetresource.PlanSteps); ModifyPlan (rollout_plan.go)
// runs them through fleetresource.Lifecycle.ModifyPlan.

// Deletion is what destroying the rollout state removes (fleetresource.PlanSteps). A private
// state that cannot be read still warns, counting the clusters it could read.
func (r *rolloutResource) Deletion(_ context.Context, state *Model, replacing string, _ bool) (fleetresource.Deletion, bool) {
	return state.deletion(replacing), true
}

// FromPrior starts the plan's private state from the prior's (fleetresource.PlanSteps). The
// waves and leaving clusters of an earlier plan never carry over: only this plan's are carried
// out.
func (r *rolloutResource) FromPrior(ctx context.Context, plan, prior *Model) diag.Diagnostics {
	plan.private = privateState{Clusters: priorClusters(prior)}
	if prior != nil {
		plan.private.Leaving, plan.private.Bridged = prior.private.Leaving, prior.private.Bridged
	}
	var diags diag.Diagnostics
	plan.private.MovingFrom, diags = movingFrom(ctx, plan, prior)
	return diags
}

// ReadsWriteOnlyFirst: an invalid `sensitive_manifests` is refused even while other content is
// unknown (fleetresource.PlanSteps).
func (r *rolloutResource) ReadsWriteOnlyFirst() bool { return true }

// ShowWriteOnly names the objects of the write-only manifests, never their content (fleetresource.PlanSteps).
func (r *rolloutResource) ShowWriteOnly(ctx context.Context, plan *Model) diag.Diagnostics {
	return plan.setSensitiveObjects(ctx)
}

// ContentKnown: see fleetresource.PlanSteps.
func (r *rolloutResource) ContentKnown(ctx context.Context, plan *Model, _ tfsdk.Config) bool {
	return plan.contentKnown(ctx)
}

// MarkContentUnknown leaves the revision and the objects to apply (fleetresource.PlanSteps).
func (r *rolloutResource) MarkContentUnknown(plan *Model) {
	plan.Revision = types.StringUnknown()
	plan.Objects = types.MapUnknown(manifesttype.ObjectsType)
}

// MarkObservedUnknown: see fleetresource.PlanSteps.
func (r *rolloutResource) MarkObservedUnknown(plan *Model) {
	plan.markOutcomeUnknown()
	plan.Waves = types.StringUnknown()
	// Apply lets go of no cluster this plan could not list; the next plan lists them.
	plan.setLeaving(nil)
}

// PlanSpec is plan's spec, refusing at plan what the Flux engine cannot deliver yet: only at plan,
// as a state that has it already must still be destroyable (fleetresource.PlanSteps).
func (r *rolloutResource) PlanSpec(ctx context.Context, plan *Model) (delivery.Spec, diag.Diagnostics) {
	spec, diags := plan.spec(ctx)
	diags.Append(plan.refuseWithFlux()...)
	return spec, diags
}

// SetContent: see fleetresource.PlanSteps.
func (r *rolloutResource) SetContent(ctx context.Context, plan *Model, spec delivery.Spec) diag.Diagnostics {
	plan.Revision = types.StringValue(spec.Revision)
	return plan.setObjects(ctx, spec.Objects)
}

// Hold plans a paused rollout (planPaused; fleetresource.PlanSteps).
func (r *rolloutResource) Hold(plan, prior *Model, diags *diag.Diagnostics) bool {
	if !plan.isPaused() {
		return false
	}
	plan.planPaused(prior, diags)
	return true
}

// TargetsKnown: see fleetresource.PlanSteps.
func (r *rolloutResource) TargetsKnown(plan *Model) bool { return plan.knownTargets() }

// SetPlan sets the planned state; the write-only `sensitive_manifests` stays null in it, as
// Terraform requires (it checks that no write-only value reaches a plan; fleetresource.PlanSteps).
func (r *rolloutResource) SetPlan(ctx context.Context, plan *Model, to *tfsdk.Plan) diag.Diagnostics {
	planned := *plan
	planned.Sensitive = types.StringNull()
	return to.Set(ctx, &planned)
}

// contentKnown reports whether what makes the revision is known at plan time: the manifests,
// the default namespace, the field rules and the values.
func (m *Model) contentKnown(ctx context.Context) bool {
	return !m.Manifests.IsUnknown() && !m.Sensitive.IsUnknown() && !m.DefaultNamespace.IsUnknown() && ignoreattr.Known(m.IgnoreFields) &&
		ignoreattr.Known(m.SensitivePaths) && fleetresource.ValuesKnown(ctx, m.Values)
}

// PlanWaves plans the waves against the fleet as it reads now (e), shows them in plan and warns
// of what apply will meet (fleetresource.PlanSteps).
func (r *rolloutResource) PlanWaves(ctx context.Context, plan, prior *Model, e fleetresource.Engine[delivery.Spec], configChanged bool,
	diags *diag.Diagnostics,
) (fleetresource.PlannedWaves, bool) {
	spec, svc := e.Spec, e.Svc
	claimsIgnored := r.replacedBy(spec.Key, plan, prior)
	// The waves are planned from the prior state when the configuration picks the same
	// clusters (see delivery.Prior); without it, a warning shows them as the fleet reads now.
	priorState := priorForPlan(ctx, plan, prior)
	res, err := svc.Plan(ctx, delivery.PlanRequest{Spec: spec, Query: e.Query, Prior: priorState, Drifted: priorDrift(prior),
		IgnoreClaims: claimsIgnored, RefuseAdoption: fleetresource.RefusesAdoption(plan.Adopt)})
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return fleetresource.PlannedWaves{}, false
	}
	if !warnPlan(ctx, diags, plan, res, spec, e.Query, prior == nil && claimsIgnored == nil) {
		return fleetresource.PlannedWaves{}, false
	}
	plan.setPlanned(res, prior, configChanged, diags)
	warnMove(diags, svc, len(res.Observation.Moving))
	if res.Plan.Changes() {
		artifact, err := svc.Pinned(spec)
		if err != nil {
			diags.Append(diagnostics.FromError(err, "Cannot Build The Flux Artifact"))
			return fleetresource.PlannedWaves{}, false
		}
		if artifact != nil {
			fleetresource.WarnFluxArtifacts(diags, []string{fleetresource.FluxArtifactLine("", *artifact)})
		}
	}
	planned := fleetresource.PlannedWaves{Waves: len(res.Plan.Waves), Policy: spec.Policy}
	planBridge(ctx, &planned.Later, svc, plan, prior, spec, e.Query, res.Observation)
	return planned, true
}
