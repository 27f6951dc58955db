package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
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

// ApplyPlan runs the rollout and fills plan's computed attributes from the outcome (see
// shared.EngineOps). As shared.Create says, a failed Create saves no state: the records in the
// clusters keep what was applied, and the next Create picks up from them.
func (r *rolloutResource) ApplyPlan(ctx context.Context, plan *Model, diags *diag.Diagnostics, create bool) bool {
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
	diags.Append(plan.settleOutcome(ctx, observeAfter(ctx, svc, query, spec, run), run)...)
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

// Refresh reads the rollout's records and the fleet into state (see shared.EngineOps); an
// imported rollout takes its configuration from the management cluster's record. It reports whether state is read (false: an early error
// left it unread).
func (r *rolloutResource) Refresh(ctx context.Context, state *Model, diags *diag.Diagnostics) bool {
	if state.RecordNamespace.IsNull() {
		state.RecordNamespace = types.StringValue(defaultRecordNamespace)
	}
	key := records.Key{Kind: "rollout", Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	if state.Revision.IsNull() && !r.importConfig(ctx, state, key, diags) {
		return false
	}
	query, d := state.query(ctx, r.Data.Window())
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	svc, d := r.service(ctx, state)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	// The plan that follows takes these reads instead of making them again (Refreshing).
	obs, err := state.observe(ctx, svc.Refreshing(), query, key)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return false
	}
	diags.Append(state.setObserved(ctx, obs)...)
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
	return true
}

// importConfig fills an imported rollout (only id, namespace and name are set) from the
// management cluster's record. (Not manifests: it is null when sensitive_manifests holds the
// whole bundle.) It reports whether it did.
func (r *rolloutResource) importConfig(ctx context.Context, state *Model, key records.Key, diags *diag.Diagnostics) bool {
	found, err := r.Data.Delivery.LoadConfig(ctx, key, state.RecordNamespace.ValueString())
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Import Rollout"))
		return false
	}
	if found == nil {
		diags.AddError("Rollout Not Found",
			fmt.Sprintf("No records of rollout %s exist in the management cluster (namespace %q). Import only rollouts that were applied.", key, state.RecordNamespace.ValueString()))
		return false
	}
	diags.Append(state.fromConfigRecord(ctx, found)...)
	if diags.HasError() {
		return false
	}
	if state.Revision.IsNull() {
		// Records written before they kept the revision: it is the manifests' own.
		if rev, err := manifest.Revision(state.Manifests.ValueString()); err == nil {
			state.Revision = types.StringValue(rev)
		}
	}
	return true
}

// Destroy removes the rollout's objects and records from the fleet (see shared.EngineOps).
func (r *rolloutResource) Destroy(ctx context.Context, state *Model, _ shared.PrivateGetter, diags *diag.Diagnostics) {
	spec, d := state.spec(ctx)
	diags.Append(d...)
	query, d := state.query(ctx, r.Data.Window())
	diags.Append(d...)
	svc, d := r.service(ctx, state)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	warnings, err := svc.Destroy(ctx, delivery.DestroyRequest{
		Spec: spec, Query: query, Orphan: state.DeletionPolicy.ValueString() == "orphan",
		Logf:    func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
		Adopted: func(note string) { diags.AddWarning("Objects Left In Place", note) },
	})
	for _, w := range warnings {
		diags.AddWarning("Cluster Not Cleaned Up", w)
	}
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Rollout Delete Failed"))
	}
}
