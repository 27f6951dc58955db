package fleetresource

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// EngineModel is the model of a resource that runs through the engine: it has `timeouts` and
// write-only values, keeps its per-cluster records in private state, is named by its Identity,
// and maps itself to what the engine takes (S, its spec). P is a pointer to M.
type EngineModel[M, S any] interface {
	Model[M]
	PrivateModel
	WriteOnly
	// Identity is what names its records; a change of it replaces the resource.
	Identity() Identity
	// SetID sets `id` ("namespace/name").
	SetID(id types.String)
	// EngineSpec converts the configuration into the engine's spec.
	EngineSpec(ctx context.Context) (S, diag.Diagnostics)
	// EngineQuery converts the cluster-picking attributes; fallback is the provider's window.
	EngineQuery(ctx context.Context, fallback *window.Window) (fleet.Query, diag.Diagnostics)
	// SetConfigured fills, before an apply, the attributes that follow from the configuration
	// alone (spec): the id, the revisions and, when the plan left them unknown, the objects.
	SetConfigured(ctx context.Context, spec S) diag.Diagnostics
}

// Engine is what an apply or a destroy works with, read from the model: the engine's spec, the
// fleet's query and the delivery service (direct, or through Flux with `delivery.flux`).
type Engine[S any] struct {
	Spec  S
	Query fleet.Query
	Svc   *delivery.Service
}

// EngineOps is what a resource that runs through the engine (`gradual_rollout`,
// `gradual_module_assignment`) supplies to Lifecycle: its apply, refresh and destroy calls,
// each mapping its own model to and from the engine. Lifecycle gives them the engine (spec, query,
// delivery service) and runs them as the Ops of Resource, which does the rest the same way for
// every resource that runs through an engine (`gradual_inplace_update` too): reading the plan or
// the state, the unconfigured provider, the timeouts, private state and the write-result rule
// (Create, Update).
type EngineOps[P, S any] interface {
	// Schema is the resource's schema (resource.Resource); Lifecycle's UpgradeState reads it.
	Schema(ctx context.Context, req resource.SchemaRequest, resp *resource.SchemaResponse)
	// Service is the delivery service for m: direct, through Flux with `delivery.flux`, or
	// moving between them.
	Service(ctx context.Context, m P) (*delivery.Service, diag.Diagnostics)
	// Prepare reads from a destroy's private state what Service needs, before it is called.
	Prepare(ctx context.Context, state P, private PrivateGetter) diag.Diagnostics
	// ApplyPlan applies plan (ctx carries the create or update timeout) and fills its computed
	// attributes from the outcome, even on failure. create says it is Create, which refuses
	// what a Terraform state holds already. It reports whether the apply succeeded.
	ApplyPlan(ctx context.Context, plan P, e Engine[S], diags *diag.Diagnostics, create bool) bool
	// Refresh reads into state what the records and the fleet hold (and, for an imported
	// resource, its configuration). It reports whether it read them: false leaves the state
	// as it was, while an error found after the read still saves what was read.
	// private is the prior private state (Read saves it again from state afterwards).
	Refresh(ctx context.Context, state P, private PrivateGetter, diags *diag.Diagnostics) bool
	// Destroy removes from the fleet what state applied (ctx carries the delete timeout);
	// private is the state's private part.
	Destroy(ctx context.Context, state P, e Engine[S], private PrivateGetter, diags *diag.Diagnostics)
}

// EngineResource is what every resource that runs through the engine implements: Lifecycle's
// Configure, import and state upgrades, and a ModifyPlan that calls Lifecycle.ModifyPlan with
// its PlanSteps.
type EngineResource interface {
	resource.ResourceWithConfigure
	resource.ResourceWithModifyPlan
	resource.ResourceWithImportState
	resource.ResourceWithUpgradeState
}

// Lifecycle is the Create/Update/Read/Delete of a resource that runs through delivery.
// Embedded in the resource (with Ops set to the resource) it gives the resource its
// Configure and its CRUD: Resource's, the path every resource that runs through an engine
// takes, with EngineOps given the engine as its Ops (engineOps). So a rule such as "a failed
// Create saves no state" or "Read without a configured provider keeps the state" holds for
// every such resource alike. Its ModifyPlan (deliveryplan.go) is their way onto the plan path
// every resource that runs through an engine takes (ModifyPlan, modifyplan.go), with PlanSteps
// the resource's own part. What is delivery's own (PlanEngine, ImportedRecord, the state
// upgrades, `namespace/name` import) stays here.
type Lifecycle[M any, P EngineModel[M, S], S any] struct {
	Configured
	Ops  EngineOps[P, S]
	Kind Kind
	// ObjectsByModule says `objects` holds a map per module (module assignments), for the state
	// upgrades.
	ObjectsByModule bool
}

// Kind names a resource that runs through the engine, for the resource, its status data source
// (StatusDataSource) and their diagnostics.
type Kind struct {
	// Records is the kind of its records' keys (records.KindRollout).
	Records string
	// Type follows the provider's name in the resource's type ("_rollout"); the status data
	// source's is Type + "_status".
	Type string
	// Title names it in diagnostic summaries ("Module Assignment"), Noun in their text
	// ("assignment").
	Title, Noun string
	// ImportExample is an import ID to show ("fleet/ingress").
	ImportExample string
	// DefaultRecordNamespace is where its records are when `record_namespace` is unset.
	DefaultRecordNamespace string
	// Kept says where what a failed apply changed is kept, for the warning of a failed Create,
	// which saves no state (FailedCreate).
	Kept string
}

// Metadata implements resource.Resource (Resource.Metadata).
func (l *Lifecycle[M, P, S]) Metadata(ctx context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	l.generic().Metadata(ctx, req, resp)
}

// ImportState takes `namespace/name`; Read then fills everything from the records.
func (l *Lifecycle[M, P, S]) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ImportNamespaceName(ctx, req, resp, l.Kind.Noun, l.Kind.ImportExample)
}

// UpgradeState implements resource.ResourceWithUpgradeState: states from before schema version 1,
// whose `waves` was a list, get `waves` as text, and from before version 2, whose `objects` held
// YAML, JSON (Upgraders).
func (l *Lifecycle[M, P, S]) UpgradeState(ctx context.Context) map[int64]resource.StateUpgrader {
	var resp resource.SchemaResponse
	l.Ops.Schema(ctx, resource.SchemaRequest{}, &resp)
	return Upgraders("gradual"+l.Kind.Type, resp.Schema, l.ObjectsByModule)
}

// ImportedRecord is the configuration record of key in recordNamespace, for an import; nil, with
// an error in diags, when it cannot be read or there is none.
func (l *Lifecycle[M, P, S]) ImportedRecord(ctx context.Context, key records.Key, recordNamespace string, diags *diag.Diagnostics) []byte {
	found, err := l.Data.Delivery.LoadConfig(ctx, key, recordNamespace)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Import "+l.Kind.Title))
		return nil
	}
	if found == nil {
		diags.AddError(l.Kind.Title+" Not Found", fmt.Sprintf("No records of %s exist in the management cluster (namespace %q). "+
			"Import only %ss that were applied.", key.Describe(), recordNamespace, l.Kind.Noun))
	}
	return found
}

// generic is the lifecycle every resource that runs through an engine shares (Resource), with
// this resource's engine calls (engineOps) as its Ops.
func (l *Lifecycle[M, P, S]) generic() *Resource[M, P] {
	return &Resource[M, P]{Configured: l.Configured, Type: l.Kind.Type, Ops: engineOps[M, P, S]{l},
		Failed: FailedCreate{Title: l.Kind.Title + " Not Saved In State",
			Detail: "The " + l.Kind.Noun + " failed before it completed, so it is not saved in the Terraform state. " + l.Kind.Kept}}
}

// Create implements resource.Resource: a failed Create saves no state, and warns so (see the
// package function Create for the rule).
func (l *Lifecycle[M, P, S]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	l.generic().Create(ctx, req, resp)
}

// Update implements resource.Resource: the state is saved even on failure (see Update).
func (l *Lifecycle[M, P, S]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	l.generic().Update(ctx, req, resp)
}

// Read implements resource.Resource (Resource.Read: without provider data, or when the refresh
// cannot read, the state stays as it is).
func (l *Lifecycle[M, P, S]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	l.generic().Read(ctx, req, resp)
}

// Delete implements resource.Resource: EngineOps.Destroy within the delete timeout.
func (l *Lifecycle[M, P, S]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	l.generic().Delete(ctx, req, resp)
}

// engineOps are the Ops of a resource that runs through delivery: its EngineOps, given the
// engine (spec, query and delivery service) read from the model.
type engineOps[M any, P EngineModel[M, S], S any] struct{ l *Lifecycle[M, P, S] }

// Apply is EngineOps.ApplyPlan within the apply's timeout, refused without provider data.
func (o engineOps[M, P, S]) Apply(ctx context.Context, timeout time.Duration, plan P, diags *diag.Diagnostics, create bool) bool {
	if !o.l.Data.Configured(diags) {
		return false
	}
	e := o.l.engine(ctx, plan, diags)
	if diags.HasError() {
		return false
	}
	diags.Append(plan.SetConfigured(ctx, e.Spec)...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return o.l.Ops.ApplyPlan(ctx, plan, e, diags, create)
}

// Refresh is EngineOps.Refresh.
func (o engineOps[M, P, S]) Refresh(ctx context.Context, state P, private PrivateGetter, diags *diag.Diagnostics) bool {
	return o.l.Ops.Refresh(ctx, state, private, diags)
}

// Destroy is EngineOps.Destroy within timeout, after EngineOps.Prepare; refused without
// provider data.
func (o engineOps[M, P, S]) Destroy(ctx context.Context, timeout time.Duration, state P, private PrivateGetter, diags *diag.Diagnostics) {
	if !o.l.Data.Configured(diags) {
		return
	}
	diags.Append(o.l.Ops.Prepare(ctx, state, private)...)
	e := o.l.engine(ctx, state, diags)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o.l.Ops.Destroy(ctx, state, e, private, diags)
}

// PlanEngine reads, for a plan, the fleet's query and the delivery service of plan, and checks
// that the delivery engine is ready; ok is false when it cannot plan.
func (l *Lifecycle[M, P, S]) PlanEngine(ctx context.Context, plan P, diags *diag.Diagnostics) (_ fleet.Query, _ *delivery.Service, ok bool) {
	query, d := plan.EngineQuery(ctx, l.Data.Window())
	diags.Append(d...)
	svc, d := l.Ops.Service(ctx, plan)
	diags.Append(d...)
	if diags.HasError() {
		return query, svc, false
	}
	if err := svc.Ready(ctx); err != nil {
		diags.Append(diagnostics.AttributeFromError(PathDelivery, err, "Delivery Not Ready"))
		return query, svc, false
	}
	return query, svc, true
}

// engine reads m's spec, query and delivery service.
func (l *Lifecycle[M, P, S]) engine(ctx context.Context, m P, diags *diag.Diagnostics) Engine[S] {
	spec, d := m.EngineSpec(ctx)
	diags.Append(d...)
	query, d := m.EngineQuery(ctx, l.Data.Window())
	diags.Append(d...)
	svc, d := l.Ops.Service(ctx, m)
	diags.Append(d...)
	return Engine[S]{Spec: spec, Query: query, Svc: svc}
}

// RunChecked runs an apply after checking that the delivery engine can deliver it as planned.
// Through Flux, a saved plan may be applied after the registry went down (or the Flux CRDs went
// away): it is refused before the Lease is taken and any Kustomization pinned, rather than let
// every cluster of the first wave fail to publish and end unsettled. checkPinned refuses a tag
// that holds other content now than the digest the plan showed (planted after the plan).
func RunChecked[R any](ctx context.Context, svc *delivery.Service, checkPinned func() error, run func() (*R, error)) (*R, error) {
	if err := svc.Ready(ctx); err != nil {
		return nil, err
	}
	if err := checkPinned(); err != nil {
		return nil, err
	}
	return run()
}

// Logf is a run's log function: the provider's log at info level.
func Logf(ctx context.Context) func(msg string, fields map[string]any) {
	return func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) }
}

// DestroyOutcome reports a destroy: a warning per cluster not cleaned up, and err under title.
func DestroyOutcome(diags *diag.Diagnostics, warnings []string, err error, title string) {
	for _, w := range warnings {
		diags.AddWarning("Cluster Not Cleaned Up", w)
	}
	if err != nil {
		diags.Append(diagnostics.FromError(err, title))
	}
}

// Refreshing reads the fleet for a refresh through svc's refreshing reads, which the plan that
// follows takes instead of making them again. d is what reading svc found; with an error in
// diags, or when the fleet cannot be read ("Cannot Read The Fleet"), ok is false.
func Refreshing[O any](diags *diag.Diagnostics, svc *delivery.Service, d diag.Diagnostics, observe func(*delivery.Service) (O, error)) (_ O, ok bool) {
	var none O
	diags.Append(d...)
	if diags.HasError() {
		return none, false
	}
	obs, err := observe(svc.Refreshing())
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return none, false
	}
	return obs, true
}

// ReadAfter reads the fleet for the state of an apply whose run never got to read it (refused
// before it took its Lease: the delivery engine not ready, a pinned tag changed, the Lease held
// by another apply): once, as a refresh would. Otherwise the run's own read at its end is what
// the state takes (delivery.RunResult.After, assignment.RunResult.After), and nothing reads the
// fleet again. It outlives the apply's cancellation or timeout by delivery.SettleTimeout: the
// state should say what the clusters hold. ok is false when the fleet cannot be read.
func ReadAfter[O any](ctx context.Context, read func(context.Context) (O, error)) (_ O, ok bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), delivery.SettleTimeout)
	defer cancel()
	obs, err := read(rctx)
	return obs, err == nil
}

// Outcome reports an apply's error under title; it reports whether there was none.
func Outcome(diags *diag.Diagnostics, err error, title string) bool {
	if err != nil {
		diags.Append(diagnostics.FromError(err, title))
		return false
	}
	return true
}
