package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// PlannedModel is the model ModifyPlan plans: a Model with write-only values (read from the
// configuration, kept out of the plan) and a private state (carried from the prior state to
// the plan, and from the plan to its apply).
type PlannedModel[M any] interface {
	Model[M]
	PrivateModel
	WriteOnly
}

// Planner is what a resource that runs through an engine supplies to ModifyPlan: the steps of
// its plan that are its own, each mapping its model. ModifyPlan owns their order, so that a
// rule such as "a plan whose content is unknown leaves everything that follows from it to
// apply" holds for every such resource alike. The resources that run through delivery supply
// PlanSteps to Lifecycle.ModifyPlan instead, which makes a Planner of them (deliveryplan.go).
type Planner[P any] interface {
	CommonPlanSteps[P]
	// Deletion is what destroying state removes, for the warning of a destroy (plan nil) or of
	// a replacement of state by plan. privateRead says whether state's private state could be
	// read; ok false leaves the warning out (a replacement: plan does not replace state).
	Deletion(ctx context.Context, state, plan P, privateRead bool) (_ Deletion, ok bool)
	// PlanKnown is the resource's plan of known content: it sets plan's computed attributes and
	// warns of what apply will meet. configChanged says the configuration changed since prior.
	// false ends the plan unset (a refusal, or the fleet cannot be read).
	PlanKnown(ctx context.Context, plan, prior P, configChanged bool, diags *diag.Diagnostics) bool
}

// CommonPlanSteps are the steps of a plan every resource that runs through an engine supplies
// alike, however it plans (Planner, PlanSteps).
type CommonPlanSteps[P any] interface {
	// FromPrior checks plan against prior (nil on create) and starts plan's private state from
	// prior's; an error ends the plan there.
	FromPrior(ctx context.Context, plan, prior P) diag.Diagnostics
	// ReadsWriteOnlyFirst says the write-only values are read (and shown) before ContentKnown,
	// so that their errors show while other content is unknown; otherwise they are read only
	// once the content is known, as reading them needs it.
	ReadsWriteOnlyFirst() bool
	// ShowWriteOnly sets what the plan shows of the write-only values (the objects they name,
	// a digest), never the values themselves.
	ShowWriteOnly(ctx context.Context, plan P) diag.Diagnostics
	// ContentKnown reports whether what the plan is made from is known at plan time.
	ContentKnown(ctx context.Context, plan P, config tfsdk.Config) bool
	// MarkContentUnknown leaves what follows from unknown content (revisions, objects) to apply.
	MarkContentUnknown(plan P)
	// MarkObservedUnknown leaves what the fleet decides (waves, outcome) to apply.
	MarkObservedUnknown(plan P)
	// SetPlan sets the planned state to plan, without its write-only values (Terraform checks
	// that none reaches a plan).
	SetPlan(ctx context.Context, plan P, to *tfsdk.Plan) diag.Diagnostics
}

// ModifyPlan shows at plan time what apply will do, with steps the resource's own part: it warns
// of a deletion, keeps a formatting-only edit of manifests from changing anything, starts the
// private state from the prior one, leaves to apply what follows from unknown content and
// otherwise plans with the resource's plan call. The order is the plan's contract: each check
// comes after what it needs known.
func ModifyPlan[M any, P PlannedModel[M]](ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, steps Planner[P]) {
	if req.Plan.Raw.IsNull() {
		warnDestroy[M](ctx, req, &resp.Diagnostics, steps)
		return
	}
	// A formatting-only edit of manifests leaves nothing changed (see manifesttype).
	if restored, ok := manifesttype.RestorePrior(req.Plan.Raw, req.Config.Raw, req.State.Raw); ok {
		req.Plan.Raw, resp.Plan.Raw = restored, restored
	}
	m, prior, ok := planFromPrior[M](ctx, req, resp, steps)
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
		diags.Append(steps.ShowWriteOnly(ctx, plan)...)
	}
	if steps.ReadsWriteOnlyFirst() {
		if readWriteOnly(); diags.HasError() {
			return
		}
	}
	// Terraform proposes the prior state unchanged when the configuration did not change.
	configChanged := prior == nil || !req.Plan.Raw.Equal(req.State.Raw)
	if !steps.ContentKnown(ctx, plan, req.Config) {
		steps.MarkContentUnknown(plan)
		steps.MarkObservedUnknown(plan)
		setPlan()
		return
	}
	if !steps.ReadsWriteOnlyFirst() {
		readWriteOnly()
	}
	if steps.PlanKnown(ctx, plan, prior, configChanged, diags) {
		setPlan()
	}
}

// warnDestroy warns what destroying the resource deletes from the clusters. A state that cannot
// be read is not warned of: the destroy reports it.
func warnDestroy[M any, P PlannedModel[M]](ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics, steps Planner[P]) {
	if req.State.Raw.IsNull() {
		return
	}
	var state M
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	privateRead := !P(&state).LoadPrivate(ctx, req.Private).HasError()
	if del, ok := steps.Deletion(ctx, P(&state), nil, privateRead); ok {
		WarnDeletion(diags, del)
	}
}

// planFromPrior reads the plan and the prior state (nil on create) with its private state, warns
// of a replacement, and lets the resource check the plan against the prior and start the
// plan's private state. ok is false when the diagnostics hold an error.
func planFromPrior[M any, P PlannedModel[M]](ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse,
	steps Planner[P],
) (_ M, prior P, ok bool) {
	plan, priorM, ok := PlanAndPrior[M](ctx, req, resp)
	if !ok {
		return plan, nil, false
	}
	if priorM != nil {
		prior = P(priorM)
		d := prior.LoadPrivate(ctx, req.Private)
		resp.Diagnostics.Append(d...)
		if del, ok := steps.Deletion(ctx, prior, P(&plan), !d.HasError()); ok {
			WarnDeletion(&resp.Diagnostics, del)
		}
	}
	resp.Diagnostics.Append(steps.FromPrior(ctx, P(&plan), prior)...)
	return plan, prior, !resp.Diagnostics.HasError()
}
