package fleetresource

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
)

// Default timeouts, when the `timeouts` attribute leaves them out.
const (
	DefaultApplyTimeout  = 60 * time.Minute // Create and Update
	DefaultDeleteTimeout = 30 * time.Minute
)

// Model is a resource model with a `timeouts` attribute; P is a pointer to it.
type Model[M any] interface {
	*M
	TimeoutsValue() timeouts.Value
}

// WriteOnly is a model with write-only attributes. Terraform keeps their values out of the plan
// and the state, so Create and Update read them from the configuration (ReadWriteOnly) before
// applying; the framework drops them again from the state saved.
type WriteOnly interface {
	ReadWriteOnly(ctx context.Context, config tfsdk.Config) diag.Diagnostics
	// ClearWriteOnly nulls them again before the state is saved: the framework does so itself
	// only for an apply without errors, and a failed Update saves its state (with the error),
	// which would then hold them.
	ClearWriteOnly()
}

// PrivateModel is a model that keeps part of itself in Terraform's private state: stored with the
// resource and handed back to the provider, never shown in a plan. Create and Update load it
// from the planned private state before applying and save it after.
type PrivateModel interface {
	LoadPrivate(ctx context.Context, from PrivateGetter) diag.Diagnostics
	SavePrivate(ctx context.Context, to PrivateSetter) diag.Diagnostics
}

// PrivateGetter and PrivateSetter are the framework's private state (its type is internal to it).
type PrivateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

// PrivateSetter: see PrivateGetter.
type PrivateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// ApplyFunc applies the planned configuration within timeout and fills plan's computed
// attributes from the outcome, even on failure. It reports whether the apply succeeded.
type ApplyFunc[P any] func(ctx context.Context, timeout time.Duration, plan P, diags *diag.Diagnostics) bool

// FailedCreate is a resource's rule for what a failed Create saves, stated where the resource
// calls Create.
type FailedCreate struct {
	// Saved: the state is saved with the error, and Terraform taints the resource, so the next
	// apply replaces it. Right where a replacement is harmless (an in-place update re-runs).
	// Otherwise nothing is saved: for a rollout a taint would make the next apply a fleet-wide
	// delete and create, so the records in the clusters keep what was applied and the next
	// Create picks up from them; the warning Title/Detail says so.
	Saved         bool
	Title, Detail string
}

// Create reads the plan, takes the create timeout and applies; failed says what a failed
// Create saves. No private state reaches it: terraform-plugin-framework gives Create none (the
// planned private state stops at its server), and the plan Terraform makes again at apply gets
// none for a create either. So a create carries out no planned waves: what a plan of a create
// shows is known after apply (TestCreateGetsNoPrivateState).
func Create[M any, P Model[M]](ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse, apply ApplyFunc[P], failed FailedCreate) {
	plan, timeout, ok := planned[M, P](ctx, req.Plan, req.Config, timeouts.Value.Create, &resp.Diagnostics)
	if !ok {
		return
	}
	if !apply(ctx, timeout, plan, &resp.Diagnostics) && !failed.Saved {
		resp.Diagnostics.AddWarning(failed.Title, failed.Detail)
		return
	}
	if pm, ok := any(plan).(PrivateModel); ok && resp.Private != nil {
		resp.Diagnostics.Append(pm.SavePrivate(ctx, resp.Private)...)
	}
	saveState(ctx, plan, &resp.State, &resp.Diagnostics)
}

// Update reads the plan, takes the update timeout and applies. The state is saved even when the
// apply fails: it then shows where each cluster ended up.
func Update[M any, P Model[M]](ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse, apply ApplyFunc[P]) {
	plan, timeout, ok := planned[M, P](ctx, req.Plan, req.Config, timeouts.Value.Update, &resp.Diagnostics)
	if !ok {
		return
	}
	pm, private := any(plan).(PrivateModel)
	if private && req.Private != nil {
		resp.Diagnostics.Append(pm.LoadPrivate(ctx, req.Private)...)
	}
	apply(ctx, timeout, plan, &resp.Diagnostics)
	if private && resp.Private != nil {
		resp.Diagnostics.Append(pm.SavePrivate(ctx, resp.Private)...)
	}
	saveState(ctx, plan, &resp.State, &resp.Diagnostics)
}

// planned reads the plan of an apply, with its write-only values from config, and the apply's
// timeout (timeoutOf: the Create's or the Update's); ok is false with an error in diags.
func planned[M any, P Model[M]](ctx context.Context, plan tfsdk.Plan, config tfsdk.Config,
	timeoutOf func(timeouts.Value, context.Context, time.Duration) (time.Duration, diag.Diagnostics), diags *diag.Diagnostics,
) (_ P, _ time.Duration, ok bool) {
	var m M
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return nil, 0, false
	}
	if wo, ok := any(P(&m)).(WriteOnly); ok {
		diags.Append(wo.ReadWriteOnly(ctx, config)...)
	}
	timeout, d := timeoutOf(P(&m).TimeoutsValue(), ctx, DefaultApplyTimeout)
	diags.Append(d...)
	return &m, timeout, !diags.HasError()
}

// saveState saves what an apply left in m as the state, without its write-only values.
func saveState[P any](ctx context.Context, m P, state *tfsdk.State, diags *diag.Diagnostics) {
	if wo, ok := any(m).(WriteOnly); ok {
		wo.ClearWriteOnly()
	}
	diags.Append(state.Set(ctx, m)...)
}

// Ops is what a resource supplies to Resource, the lifecycle every resource that runs through
// an engine shares (`gradual_rollout` and `gradual_module_assignment` through delivery, by way of
// Lifecycle; `gradual_inplace_update` through the in-place update services): its apply, refresh
// and destroy, each mapping its own model to and from what it runs through.
type Ops[P any] interface {
	// Apply applies plan within timeout and fills its computed attributes from the outcome, even
	// on failure (an ApplyFunc); create says it is Create. It reports whether the apply succeeded.
	Apply(ctx context.Context, timeout time.Duration, plan P, diags *diag.Diagnostics, create bool) bool
	// Refresh reads into state what the clusters hold. It reports whether it read them: false
	// leaves the state as it was, while an error found after the read still saves what was read.
	// private is the prior private state; Read saves it again from state afterwards.
	Refresh(ctx context.Context, state P, private PrivateGetter, diags *diag.Diagnostics) bool
	// Destroy removes from the fleet what state applied, within timeout; private is the state's
	// private part. A resource whose changes are not undone does nothing here.
	Destroy(ctx context.Context, timeout time.Duration, state P, private PrivateGetter, diags *diag.Diagnostics)
}

// Resource is the Configure/Metadata/Create/Update/Read/Delete of a resource that runs through
// an engine, with Ops the resource's own part. Embedded in the resource it gives the resource
// these methods, so that the write-result rule (Create, Update), "Read without a configured
// provider keeps the state" and the private state's round trip hold for every such resource alike.
type Resource[M any, P Model[M]] struct {
	Configured
	// Type follows the provider's name in the resource's type ("_inplace_update").
	Type string
	// Failed is what a failed Create saves (see Create).
	Failed FailedCreate
	Ops    Ops[P]
}

// Metadata implements resource.Resource.
func (r *Resource[M, P]) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + r.Type
}

// Create implements resource.Resource (see the package function Create for the rule).
func (r *Resource[M, P]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	Create(ctx, req, resp, r.applyFunc(true), r.Failed)
}

// Update implements resource.Resource: the state is saved even on failure (see Update).
func (r *Resource[M, P]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	Update(ctx, req, resp, r.applyFunc(false))
}

func (r *Resource[M, P]) applyFunc(create bool) ApplyFunc[P] {
	return func(ctx context.Context, timeout time.Duration, plan P, diags *diag.Diagnostics) bool {
		return r.Ops.Apply(ctx, timeout, plan, diags, create)
	}
}

// Read implements resource.Resource. Without provider data (a plan whose provider settings
// are not known yet) the state stays as it is; when the refresh cannot read, too. A model
// with private state (PrivateModel) saves it again from what the refresh left in it.
func (r *Resource[M, P]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.Data == nil {
		return
	}
	if !r.Ops.Refresh(ctx, &state, req.Private, &resp.Diagnostics) {
		return
	}
	if pm, ok := any(P(&state)).(PrivateModel); ok {
		resp.Diagnostics.Append(pm.SavePrivate(ctx, resp.Private)...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete implements resource.Resource: Ops.Destroy with the delete timeout.
func (r *Resource[M, P]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := P(&state).TimeoutsValue().Delete(ctx, DefaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	r.Ops.Destroy(ctx, timeout, &state, req.Private, &resp.Diagnostics)
}
