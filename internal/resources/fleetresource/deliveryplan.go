package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// PlanSteps is what a resource that runs through delivery supplies to Lifecycle.ModifyPlan: the
// steps of its plan that are its own, each mapping its model. Lifecycle makes of them the
// Planner of ModifyPlan (deliveryPlanner), adding what every such resource plans alike: its
// identity (a change is a replacement; `id`), and the plan of known content against the fleet
// through the delivery engine, in one order (spec, content, hold, targets, waves).
type PlanSteps[P, S any] interface {
	CommonPlanSteps[P]
	// Deletion is what destroying state removes, for the warning of a destroy or a replacement
	// (replacing names the attributes that force it, "" for a destroy). privateRead says
	// whether state's private state, which holds its clusters, could be read; ok false leaves
	// the warning out.
	Deletion(ctx context.Context, state P, replacing string, privateRead bool) (_ Deletion, ok bool)
	// PlanSpec is the engine's spec of plan, with the plan-time refusals of the resource.
	PlanSpec(ctx context.Context, plan P) (S, diag.Diagnostics)
	// SetContent sets what follows from the spec alone: the revisions and the objects.
	SetContent(ctx context.Context, plan P, spec S) diag.Diagnostics
	// Hold reports whether the configuration holds the whole resource (a paused rollout); it
	// then plans it so, and no cluster is read.
	Hold(plan, prior P, diags *diag.Diagnostics) bool
	// TargetsKnown reports whether the attributes that pick clusters and waves are known.
	TargetsKnown(plan P) bool
	// PlanWaves plans the waves of plan against the fleet (e) as it reads now, warns of what
	// apply will meet and sets the planned attributes. ok false ends the plan unset (a refusal,
	// or the fleet cannot be read).
	PlanWaves(ctx context.Context, plan, prior P, e Engine[S], configChanged bool, diags *diag.Diagnostics) (_ PlannedWaves, ok bool)
}

// PlannedWaves is what PlanWaves planned, for the warnings PlanKnown adds after it.
type PlannedWaves struct {
	// Waves is how many waves apply runs one after the other, and Policy how long each may
	// take: the timeout warning compares them with the apply's timeout.
	Waves  int
	Policy engine.Policy
	// Later are diagnostics shown after the timeout warning (the bridge for joiners).
	Later diag.Diagnostics
}

// ModifyPlan is ModifyPlan (modifyplan.go) of a resource that runs through delivery, with steps
// its own part of the plan.
func (l *Lifecycle[M, P, S]) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, steps PlanSteps[P, S]) {
	ModifyPlan[M](ctx, req, resp, deliveryPlanner[M, P, S]{PlanSteps: steps, l: l})
}

// deliveryPlanner is the Planner of a resource that runs through delivery: its PlanSteps, with
// the steps every such resource takes alike.
type deliveryPlanner[M any, P EngineModel[M, S], S any] struct {
	PlanSteps[P, S]
	l *Lifecycle[M, P, S]
}

// Deletion warns of a destroy, and of a replacement when the identity changes: it names the
// records, so a change is a destroy and a create.
func (d deliveryPlanner[M, P, S]) Deletion(ctx context.Context, state, plan P, privateRead bool) (Deletion, bool) {
	replacing := ""
	if plan != nil {
		if replacing = IdentityChange(plan.Identity(), state.Identity()); replacing == "" {
			return Deletion{}, false
		}
	}
	return d.PlanSteps.Deletion(ctx, state, replacing, privateRead)
}

// FromPrior is the resource's, then names the plan (`id`) as far as its identity is known, so
// that the id shows even while the content is unknown.
func (d deliveryPlanner[M, P, S]) FromPrior(ctx context.Context, plan, prior P) diag.Diagnostics {
	diags := d.PlanSteps.FromPrior(ctx, plan, prior)
	if id := plan.Identity(); !id.Namespace.IsUnknown() && !id.Name.IsUnknown() {
		plan.SetID(types.StringValue(id.Namespace.ValueString() + "/" + id.Name.ValueString()))
	}
	return diags
}

// PlanKnown sets what follows from the spec, then plans the waves against the fleet as it reads
// now, unless the resource is held, the provider connects later or the clusters depend on
// other resources: then apply works out the rest.
func (d deliveryPlanner[M, P, S]) PlanKnown(ctx context.Context, plan, prior P, configChanged bool, diags *diag.Diagnostics) bool {
	spec, ds := d.PlanSpec(ctx, plan)
	if diags.Append(ds...); diags.HasError() {
		return false
	}
	diags.Append(d.SetContent(ctx, plan, spec)...)
	if d.Hold(plan, prior, diags) {
		return true
	}
	if d.l.Data == nil || !d.TargetsKnown(plan) {
		d.MarkObservedUnknown(plan)
		return true
	}
	query, svc, ok := d.l.PlanEngine(ctx, plan, diags)
	if !ok {
		return false
	}
	planned, ok := d.PlanWaves(ctx, plan, prior, Engine[S]{Spec: spec, Query: query, Svc: svc}, configChanged, diags)
	if !ok {
		return false
	}
	WarnWavesOutlast(ctx, diags, plan.TimeoutsValue(), prior == nil, planned.Waves, planned.Policy)
	diags.Append(planned.Later...)
	return true
}
