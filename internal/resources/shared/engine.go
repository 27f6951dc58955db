package shared

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
)

// EngineModel is the model of a resource that runs through the engine: it has `timeouts` and
// keeps its per-cluster records in private state. P is a pointer to M.
type EngineModel[M any] interface {
	Model[M]
	PrivateModel
}

// EngineOps is what a resource that runs through the engine (`gradual_rollout`,
// `gradual_module_assignment`) supplies to Lifecycle: its apply, refresh and destroy calls,
// each mapping its own model to and from the engine. Lifecycle does the rest the same way for
// every such resource: reading the plan or the state, the unconfigured provider, the timeouts,
// private state and the write-result rule (Create, Update).
type EngineOps[P any] interface {
	// ApplyPlan applies plan (ctx carries the create or update timeout) and fills its computed
	// attributes from the outcome, even on failure. create says it is Create, which refuses
	// what a Terraform state holds already. It reports whether the apply succeeded.
	ApplyPlan(ctx context.Context, plan P, diags *diag.Diagnostics, create bool) bool
	// Refresh reads into state what the records and the fleet hold (and, for an imported
	// resource, its configuration). It reports whether it read them: false leaves the state
	// as it was, while an error found after the read still saves what was read.
	Refresh(ctx context.Context, state P, diags *diag.Diagnostics) bool
	// Destroy removes from the fleet what state applied (ctx carries the delete timeout);
	// private is the state's private part.
	Destroy(ctx context.Context, state P, private PrivateGetter, diags *diag.Diagnostics)
}

// Lifecycle is the Create/Update/Read/Delete of a resource that runs through the engine.
// Embedded in the resource (with Ops set to the resource) it gives the resource its
// Configure and its CRUD, so that a rule such as "a failed Create saves no state" or "Read
// without a configured provider keeps the state" holds for every such resource alike.
type Lifecycle[M any, P EngineModel[M]] struct {
	Configured
	Ops EngineOps[P]
	// Failed is the resource's rule for what a failed Create saves.
	Failed FailedCreate
}

// Create implements resource.Resource (see the package function Create for the rule).
func (l *Lifecycle[M, P]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	Create(ctx, req, resp, l.applyFunc(true), l.Failed)
}

// Update implements resource.Resource: the state is saved even on failure (see Update).
func (l *Lifecycle[M, P]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	Update(ctx, req, resp, l.applyFunc(false))
}

// applyFunc is Ops.ApplyPlan within the apply's timeout, refused without provider data.
func (l *Lifecycle[M, P]) applyFunc(create bool) ApplyFunc[P] {
	return func(ctx context.Context, timeout time.Duration, plan P, diags *diag.Diagnostics) bool {
		if l.Data == nil {
			diags.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
			return false
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return l.Ops.ApplyPlan(ctx, plan, diags, create)
	}
}

// Read implements resource.Resource. Without provider data (a plan whose provider settings
// are not known yet) the state stays as it is; when the refresh cannot read, too.
func (l *Lifecycle[M, P]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || l.Data == nil {
		return
	}
	if !l.Ops.Refresh(ctx, &state, &resp.Diagnostics) {
		return
	}
	resp.Diagnostics.Append(P(&state).SavePrivate(ctx, resp.Private)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete implements resource.Resource: Ops.Destroy within the delete timeout.
func (l *Lifecycle[M, P]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if l.Data == nil {
		resp.Diagnostics.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return
	}
	timeout, diags := P(&state).TimeoutsValue().Delete(ctx, DefaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l.Ops.Destroy(ctx, &state, req.Private, &resp.Diagnostics)
}
