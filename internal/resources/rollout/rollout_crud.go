package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// Create applies the rollout. As shared.Create says, a failed Create saves no state: the records
// in the clusters keep what was applied, and the next Create picks up from them.
func (r *rolloutResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	create := func(ctx context.Context, timeout time.Duration, plan *Model, diags *diag.Diagnostics) bool {
		return r.apply(ctx, timeout, plan, diags, true)
	}
	shared.Create(ctx, req, resp, create, shared.FailedCreate{Title: "Rollout Not Saved In State",
		Detail: "The rollout failed before it completed, so it is not saved in the Terraform state. Every change it made is recorded in the clusters; the next apply continues from those records instead of starting over."})
}

// Update applies the rollout; its state is saved even on failure (see shared.Update).
func (r *rolloutResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	update := func(ctx context.Context, timeout time.Duration, plan *Model, diags *diag.Diagnostics) bool {
		return r.apply(ctx, timeout, plan, diags, false)
	}
	shared.Update(ctx, req, resp, update)
}

// apply runs the rollout and fills plan's computed attributes from the outcome. It reports
// whether the rollout succeeded. create says it is the resource's Create, which refuses a rollout
// that a Terraform state holds already.
func (r *rolloutResource) apply(ctx context.Context, timeout time.Duration, plan *Model, diags *diag.Diagnostics, create bool) bool {
	if r.Data == nil {
		diags.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return false
	}
	spec, query, svc, ok := r.prepareApply(ctx, plan, diags)
	if !ok {
		return false
	}
	if plan.isPaused() {
		return r.applyPaused(ctx, plan, diags)
	}
	// The waves the plan showed are the waves apply carries out: their clusters come with the
	// plan's private state (none when the plan could not plan them, e.g. on create).
	planned, leaving := plan.private.PlannedWaves, plan.private.PlannedLeaving
	plan.private.PlannedWaves, plan.private.PlannedLeaving = nil, nil // carried out once
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	config, d := plan.configRecord(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	run, err := runChecked(ctx, svc, delivery.RunRequest{
		Spec: spec, Query: query, Planned: planned, PlannedKnown: planned != nil, Config: config,
		Leave: true, Orphan: plan.DeletionPolicy.ValueString() == "orphan", Leaving: leaving,
		Create: create, ImportHint: importHint(spec.Key),
		Logf: func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
	})
	if run != nil {
		warnRun(diags, run, spec.AdoptUnrecorded, plan.DeletionPolicy.ValueString())
	}
	// Only what the plan left unknown is filled in: a value the plan showed is a promise, and
	// Terraform rejects an apply that breaks one.
	after := observeAfter(ctx, svc, query, spec, run)
	plan.settleMove(after)
	diags.Append(plan.settleOutcome(ctx, after, run)...)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Rollout Failed"))
		return false
	}
	return true
}

// prepareApply reads what apply needs from the plan (the rollout's spec, the fleet's query and
// the delivery service) and fills the attributes that follow from the configuration alone: the
// id, the revision and, when the plan left them unknown, the objects. ok is false when the
// configuration cannot be read.
func (r *rolloutResource) prepareApply(ctx context.Context, plan *Model, diags *diag.Diagnostics) (_ delivery.Spec, _ fleet.Query, _ *delivery.Service, ok bool) {
	spec, d := plan.spec(ctx)
	diags.Append(d...)
	query, d := plan.query(ctx, r.Data.Window())
	diags.Append(d...)
	svc, d := r.service(ctx, plan)
	diags.Append(d...)
	if diags.HasError() {
		return spec, query, nil, false
	}
	plan.ID = types.StringValue(spec.Key.Namespace + "/" + spec.Key.Name)
	plan.Revision = types.StringValue(spec.Revision)
	if plan.SensitiveObjects.IsUnknown() {
		diags.Append(plan.setSensitiveObjects(ctx)...)
	}
	if plan.Objects.IsUnknown() {
		diags.Append(plan.setObjects(ctx, spec.Objects)...)
	}
	return spec, query, svc, true
}

// runChecked runs the rollout, after checking that its delivery engine can deliver it as
// planned. Through Flux, a saved plan may be applied after the registry went down (or the Flux
// CRDs went away): it is refused before the Lease is taken and any Kustomization re-pinned,
// rather than let every cluster of the first wave fail to publish and end unsettled.
func runChecked(ctx context.Context, svc *delivery.Service, req delivery.RunRequest) (*delivery.RunResult, error) {
	if err := svc.Ready(ctx); err != nil {
		return nil, err
	}
	// The plan showed the digest computed from its manifests: a tag that holds other content now
	// (planted after the plan) is refused before anything is pinned.
	if err := svc.CheckPinned(ctx, req.Spec); err != nil {
		return nil, err
	}
	return svc.Run(ctx, req)
}

// warnRun says at the end of the apply what the run did beyond its waves and what it left for
// later, as warnings: Terraform has no informational diagnostic. adoptUnrecorded and
// deletionPolicy are the rollout's settings, which the wording follows.
func warnRun(diags *diag.Diagnostics, run *delivery.RunResult, adoptUnrecorded bool, deletionPolicy string) {
	if len(run.Plan.Differences) > 0 {
		// One warning: Terraform folds warnings with the same summary into "similar warnings".
		diags.AddWarning("Apply Differs From The Plan", "The fleet changed between plan and apply; apply kept to the plan:\n  - "+
			strings.Join(run.Plan.Differences, "\n  - "))
	}
	for _, w := range run.Result.Warnings() {
		diags.AddWarning("Rollout Warning", w)
	}
	for _, note := range run.Adopted {
		diags.AddWarning("Objects Left In Place", note)
	}
	if run.After != nil {
		// The clusters apply held back because their records are gone: said at the end of
		// the apply as the plan said it, since `attention` is read only by who looks.
		warnRecordsMissing(diags, run.After, adoptUnrecorded)
	}
	if len(run.Gates) > 0 {
		diags.AddWarning("Cluster Gates: Changes Not Blamed On The Revision", "The cluster gates saw these changes during the waves and, "+
			"as the revision did not make them, did not count them against it:\n  "+strings.Join(run.Gates, "\n  "))
	}
	if len(run.Kept) > 0 {
		diags.AddWarning("Dropped Objects Kept", "The revision no longer holds these objects, but prune left them in place:\n  "+
			strings.Join(run.Kept, "\n  "))
	}
	if len(run.Left) > 0 {
		diags.AddWarning("Clusters Left The Rollout", leftDetail(run.Left, deletionPolicy))
	}
	if len(run.Plan.Waves) > 0 || len(run.Plan.Resume) > 0 || len(run.Left) > 0 {
		// What the run did, in one line, at the end of the apply (the same line is the run's
		// last Event).
		diags.AddWarning("Rollout Summary", run.Summary())
	}
	if len(run.Moved) > 0 {
		diags.AddWarning("Clusters Moved Between Engines", fmt.Sprintf("%d cluster(s) verified on the new engine, and the engine the rollout "+
			"moves from let go of them without pruning or deleting anything: %s", len(run.Moved), shared.ShortList(run.Moved, 20)))
	}
	if len(run.MoveFailures) > 0 {
		diags.AddWarning("Engine Not Let Go Yet", "These clusters verified on the new engine, but the engine the rollout moves from "+
			"still holds them; the next apply lets it go:\n  "+strings.Join(run.MoveFailures, "\n  "))
	}
	if len(run.LeaveFailures) > 0 {
		diags.AddWarning("Clusters Not Cleaned Up", "These clusters left the rollout but still hold its objects or records; the next apply tries again:\n  "+
			strings.Join(run.LeaveFailures, "\n  "))
	}
}

// observeAfterTimeout bounds observeAfter's read of the fleet, which outlives the apply's
// cancellation or timeout.
const observeAfterTimeout = 30 * time.Second

// observeAfter returns the fleet as the run left it: as the run read it last, or, when the run
// stopped before it read the fleet (the Lease is held, the management cluster is unreachable),
// as the clusters say now, the way a refresh would. nil when the fleet cannot be read at all.
func observeAfter(ctx context.Context, svc *delivery.Service, query fleet.Query, spec delivery.Spec, run *delivery.RunResult) *delivery.Observation {
	if run != nil && run.After != nil {
		return run.After
	}
	// Read even when the apply's own time is up: the state should say what the clusters hold.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), observeAfterTimeout)
	defer cancel()
	obs, err := svc.Observe(octx, query, spec.Key, spec.RecordNamespace, false)
	if err != nil {
		return nil
	}
	return obs
}

// settleOutcome fills the attributes the plan left unknown from what apply left (after), or
// with empty values when the run never got far enough to read the fleet: the state Terraform
// saves may hold no unknown value.
func (m *Model) settleOutcome(ctx context.Context, after *delivery.Observation, run *delivery.RunResult) diag.Diagnostics {
	var diags diag.Diagnostics
	read := after != nil
	if !read {
		after = &delivery.Observation{}
	}
	observed := *m
	diags.Append(observed.setObserved(ctx, after)...)
	if read || m.private.Clusters == nil {
		// The per-cluster records are private, not a promise of the plan: what apply left, or,
		// when it could not read the fleet, what the last refresh read.
		m.private.Clusters = observed.private.Clusters
	}
	// What the run did, rather than what the fleet reads now: the waves carried out and the
	// clusters let go of. The rest comes from what apply left.
	if m.Waves.IsUnknown() {
		var done engine.Plan
		if run != nil {
			done = run.Plan
		}
		m.setWaves(done)
	}
	if m.Leaving.IsUnknown() {
		var left []string
		if run != nil {
			left = run.Left
		}
		m.setLeaving(left)
	}
	shared.FillUnknown(m, &observed)
	if read {
		m.private.Leaving = observed.private.Leaving
	}
	return diags
}

func (r *rolloutResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state Model
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.Data == nil {
		return // nothing to refresh from yet
	}
	if state.RecordNamespace.IsNull() {
		state.RecordNamespace = types.StringValue(defaultRecordNamespace)
	}
	key := records.Key{Kind: "rollout", Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	if state.Revision.IsNull() {
		// Imported (only id, namespace and name are set): the configuration comes from the
		// management cluster's record. (Not manifests: it is null when sensitive_manifests
		// holds the whole bundle.)
		found, err := r.Data.Delivery.LoadConfig(ctx, key, state.RecordNamespace.ValueString())
		if err != nil {
			resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Import Rollout"))
			return
		}
		if found == nil {
			resp.Diagnostics.AddError("Rollout Not Found",
				fmt.Sprintf("No records of rollout %s exist in the management cluster (namespace %q). Import only rollouts that were applied.", key, state.RecordNamespace.ValueString()))
			return
		}
		resp.Diagnostics.Append(state.fromConfigRecord(ctx, found)...)
		if resp.Diagnostics.HasError() {
			return
		}
		if state.Revision.IsNull() {
			// Records written before they kept the revision: it is the manifests' own.
			if rev, err := manifest.Revision(state.Manifests.ValueString()); err == nil {
				state.Revision = types.StringValue(rev)
			}
		}
	}
	query, diags := state.query(ctx, r.Data.Window())
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(state.loadMoving(ctx, req.Private)...)
	if resp.Diagnostics.HasError() {
		return
	}
	svc, diags := r.service(ctx, &state)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The plan that follows takes these reads instead of making them again (Refreshing).
	obs, err := state.observe(ctx, svc.Refreshing(), query, key)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	resp.Diagnostics.Append(state.setObserved(ctx, obs)...)
	state.settleMove(obs)
	resp.Diagnostics.Append(state.SavePrivate(ctx, resp.Private)...)
	if state.Objects.IsNull() {
		// Imported, or written by a version without `objects`: filled here so that the next
		// plan, which works them out the same way, shows no change.
		state.Objects = manifesttype.ObjectsOf(ctx, state.Manifests.ValueString(), state.DefaultNamespace.ValueString())
	}
	if state.Waves.IsNull() {
		state.setWaves(engine.Plan{})
	}
	if state.Leaving.IsNull() {
		state.setLeaving(nil) // imported, or written by a version without `leaving`
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *rolloutResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state Model
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.Data == nil {
		resp.Diagnostics.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, shared.DefaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	// A rollout moving between engines is removed from both.
	resp.Diagnostics.Append(state.loadMoving(ctx, req.Private)...)
	spec, d := state.spec(ctx)
	resp.Diagnostics.Append(d...)
	query, d := state.query(ctx, r.Data.Window())
	resp.Diagnostics.Append(d...)
	svc, d := r.service(ctx, &state)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	warnings, err := svc.Destroy(ctx, delivery.DestroyRequest{
		Spec: spec, Query: query, Orphan: state.DeletionPolicy.ValueString() == "orphan",
		Logf:    func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
		Adopted: func(note string) { resp.Diagnostics.AddWarning("Objects Left In Place", note) },
	})
	for _, w := range warnings {
		resp.Diagnostics.AddWarning("Cluster Not Cleaned Up", w)
	}
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Rollout Delete Failed"))
	}
}
