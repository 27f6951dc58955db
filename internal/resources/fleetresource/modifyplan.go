package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// PlanSteps is what a resource that runs through the engine supplies to Lifecycle.ModifyPlan:
// the steps of its plan that are its own, each mapping its model. ModifyPlan owns their order,
// so that a rule such as "a plan without provider data leaves the fleet's part to apply" holds
// for every such resource alike.
type PlanSteps[P, S any] interface {
	// Deletion is what destroying state removes, for the warning of a destroy or a replacement
	// (replacing names the attributes that force it, "" for a destroy). privateRead says
	// whether state's private state, which holds its clusters, could be read; ok false leaves
	// the warning out.
	Deletion(ctx context.Context, state P, replacing string, privateRead bool) (_ Deletion, ok bool)
	// FromPrior checks plan against prior (nil on create) and starts plan's private state from
	// prior's; an error ends the plan there.
	FromPrior(ctx context.Context, plan, prior P) diag.Diagnostics
	// ReadsWriteOnlyFirst says the write-only values are read (and their objects named) before
	// ContentKnown, so that their errors show while other content is unknown; otherwise they
	// are read only once the content is known, as reading them needs it.
	ReadsWriteOnlyFirst() bool
	// SetSensitiveObjects names the objects of the write-only manifests (never their content).
	SetSensitiveObjects(ctx context.Context, plan P) diag.Diagnostics
	// ContentKnown reports whether what makes the revisions is known at plan time.
	ContentKnown(ctx context.Context, plan P, config tfsdk.Config) bool
	// MarkContentUnknown leaves what follows from unknown content (revisions, objects) to apply.
	MarkContentUnknown(plan P)
	// MarkObservedUnknown leaves what the fleet decides (waves, outcome, leaving) to apply.
	MarkObservedUnknown(plan P)
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
	// SetPlan sets the planned state to plan.
	SetPlan(ctx context.Context, plan P, to *tfsdk.Plan) diag.Diagnostics
}

// PlannedWaves is what PlanWaves planned, for the warnings ModifyPlan adds after it.
type PlannedWaves struct {
	// Waves is how many waves apply runs one after the other, and Policy how long each may
	// take: the timeout warning compares them with the apply's timeout.
	Waves  int
	Policy engine.Policy
	// Later are diagnostics shown after the timeout warning (the assignment's bridge).
	Later diag.Diagnostics
}

// ModifyPlan shows at plan time what apply will do, with steps the resource's own part: it warns
// of a deletion, keeps a formatting-only edit of the manifests from changing anything, starts
// the private state from the prior one, leaves to apply what is not known yet (the content,
// the provider, the clusters) and otherwise plans the waves against the fleet. The order is
// the plan's contract: each check comes after what it needs known.
func (l *Lifecycle[M, P, S]) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, steps PlanSteps[P, S]) {
	if req.Plan.Raw.IsNull() {
		warnDestroy[M, P](ctx, req, &resp.Diagnostics, steps)
		return
	}
	// A formatting-only edit of manifests leaves nothing changed (see manifesttype).
	if restored, ok := manifesttype.RestorePrior(req.Plan.Raw, req.Config.Raw, req.State.Raw); ok {
		req.Plan.Raw, resp.Plan.Raw = restored, restored
	}
	m, prior, ok := planFromPrior[M, P](ctx, req, resp, steps)
	if !ok {
		return
	}
	plan := P(&m)
	diags := &resp.Diagnostics
	defer func() { diags.Append(plan.SavePrivate(ctx, resp.Private)...) }()
	setPlan := func() { diags.Append(steps.SetPlan(ctx, plan, &resp.Plan)...) }
	// Write-only: in the configuration only; SetPlan leaves them out of the plan.
	readWriteOnly := func() {
		diags.Append(plan.ReadWriteOnly(ctx, req.Config)...)
		diags.Append(steps.SetSensitiveObjects(ctx, plan)...)
	}
	if steps.ReadsWriteOnlyFirst() {
		if readWriteOnly(); diags.HasError() {
			return
		}
	}
	// Terraform proposes the prior state unchanged when the configuration did not change.
	configChanged := prior == nil || !req.Plan.Raw.Equal(req.State.Raw)
	if id := plan.Identity(); !id.Namespace.IsUnknown() && !id.Name.IsUnknown() {
		plan.SetID(types.StringValue(id.Namespace.ValueString() + "/" + id.Name.ValueString()))
	}
	if !steps.ContentKnown(ctx, plan, req.Config) {
		steps.MarkContentUnknown(plan)
		steps.MarkObservedUnknown(plan)
		setPlan()
		return
	}
	if !steps.ReadsWriteOnlyFirst() {
		readWriteOnly()
	}
	spec, d := steps.PlanSpec(ctx, plan)
	if diags.Append(d...); diags.HasError() {
		return
	}
	diags.Append(steps.SetContent(ctx, plan, spec)...)
	if steps.Hold(plan, prior, diags) {
		setPlan()
		return
	}
	if l.Data == nil || !steps.TargetsKnown(plan) {
		// The provider connects later, or the clusters depend on other resources: show what is
		// known and let apply work out the rest.
		steps.MarkObservedUnknown(plan)
		setPlan()
		return
	}
	l.planFleet(ctx, resp, steps, plan, prior, spec, configChanged)
}

// warnDestroy warns what destroying the resource deletes from the clusters. A state that cannot
// be read is not warned of: the destroy reports it.
func warnDestroy[M any, P EngineModel[M, S], S any](ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics, steps PlanSteps[P, S]) {
	if req.State.Raw.IsNull() {
		return
	}
	var state M
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	privateRead := !P(&state).LoadPrivate(ctx, req.Private).HasError()
	if del, ok := steps.Deletion(ctx, P(&state), "", privateRead); ok {
		WarnDeletion(diags, del)
	}
}

// planFromPrior reads the plan and the prior state (nil on create) with its private state, warns
// of a replacement (the identity changes), and lets the resource check the plan against the
// prior and start the plan's private state. ok is false when the diagnostics hold an error.
func planFromPrior[M any, P EngineModel[M, S], S any](ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse,
	steps PlanSteps[P, S],
) (_ M, prior P, ok bool) {
	plan, priorM, ok := PlanAndPrior[M](ctx, req, resp)
	if !ok {
		return plan, nil, false
	}
	if priorM != nil {
		prior = P(priorM)
		d := prior.LoadPrivate(ctx, req.Private)
		resp.Diagnostics.Append(d...)
		if changed := IdentityChange(P(&plan).Identity(), prior.Identity()); changed != "" {
			if del, ok := steps.Deletion(ctx, prior, changed, !d.HasError()); ok {
				WarnDeletion(&resp.Diagnostics, del)
			}
		}
	}
	resp.Diagnostics.Append(steps.FromPrior(ctx, P(&plan), prior)...)
	return plan, prior, !resp.Diagnostics.HasError()
}

// planFleet plans the waves against the fleet as it reads now (steps.PlanWaves), warns when they
// may outlast the apply's timeout, and sets the plan. spec is plan's; configChanged says the
// configuration changed since prior.
func (l *Lifecycle[M, P, S]) planFleet(ctx context.Context, resp *resource.ModifyPlanResponse, steps PlanSteps[P, S], plan, prior P, spec S,
	configChanged bool,
) {
	query, svc, ok := l.PlanEngine(ctx, plan, &resp.Diagnostics)
	if !ok {
		return
	}
	planned, ok := steps.PlanWaves(ctx, plan, prior, Engine[S]{Spec: spec, Query: query, Svc: svc}, configChanged, &resp.Diagnostics)
	if !ok {
		return
	}
	WarnWavesOutlast(ctx, &resp.Diagnostics, plan.TimeoutsValue(), prior == nil, planned.Waves, planned.Policy)
	resp.Diagnostics.Append(planned.Later...)
	resp.Diagnostics.Append(steps.SetPlan(ctx, plan, &resp.Plan)...)
}
