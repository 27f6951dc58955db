package rollout

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// ApplyPlan runs the rollout and fills plan's computed attributes from the outcome (see
// fleetresource.EngineOps). As fleetresource.Create says, a failed Create saves no state: the records in the
// clusters keep what was applied, and the next Create picks up from them.
func (r *rolloutResource) ApplyPlan(ctx context.Context, plan *Model, e fleetresource.Engine[delivery.Spec], diags *diag.Diagnostics, create bool) bool {
	if plan.isPaused() {
		return r.applyPaused(ctx, plan, diags)
	}
	spec, query, svc := e.Spec, e.Query, e.Svc
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
		Create: create, ImportHint: importHint(spec.Key), Logf: fleetresource.Logf(ctx),
	})
	if run != nil {
		warnRun(diags, run, spec.AdoptUnrecorded, plan.DeletionPolicy.ValueString())
	}
	// Only what the plan left unknown is filled in: a value the plan showed is a promise, and
	// Terraform rejects an apply that breaks one.
	after := observeAfter(ctx, svc, query, spec, run)
	plan.settleMove(after)
	diags.Append(plan.settleOutcome(ctx, after, run)...)
	plan.applyBridge(ctx, diags, svc, spec, query, after)
	return fleetresource.Outcome(diags, err, "Rollout Failed")
}

// SetConfigured fills the attributes that follow from the configuration alone: the id, the
// revision and, when the plan left them unknown, the objects (fleetresource.EngineModel).
func (m *Model) SetConfigured(ctx context.Context, spec delivery.Spec) (diags diag.Diagnostics) {
	m.ID = types.StringValue(spec.Key.Namespace + "/" + spec.Key.Name)
	m.Revision = types.StringValue(spec.Revision)
	if m.SensitiveObjects.IsUnknown() {
		diags.Append(m.setSensitiveObjects(ctx)...)
	}
	if m.Objects.IsUnknown() {
		diags.Append(m.setObjects(ctx, spec.Objects)...)
	}
	return diags
}

// runChecked runs the rollout (see fleetresource.RunChecked). The plan showed the digest computed
// from its manifests.
func runChecked(ctx context.Context, svc *delivery.Service, req delivery.RunRequest) (*delivery.RunResult, error) {
	return fleetresource.RunChecked(ctx, svc, func() error { return svc.CheckPinned(ctx, req.Spec) },
		func() (*delivery.RunResult, error) { return svc.Run(ctx, req) })
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
	warnList(diags, "Cluster Gates: Changes Not Blamed On The Revision", "The cluster gates saw these changes during the waves and, "+
		"as the revision did not make them, did not count them against it", run.Gates)
	warnList(diags, "Dropped Objects Kept", "The revision no longer holds these objects, but prune left them in place", run.Kept)
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
			"moves from let go of them without pruning or deleting anything: %s", len(run.Moved), fleetresource.ShortList(run.Moved, 20)))
	}
	warnList(diags, "Engine Not Let Go Yet", "These clusters verified on the new engine, but the engine the rollout moves from "+
		"still holds them; the next apply lets it go", run.MoveFailures)
	warnList(diags, "Clusters Not Cleaned Up", "These clusters left the rollout but still hold its objects or records; the next apply tries again",
		run.LeaveFailures)
}

// warnList adds a warning that lists items after intro, one a line; none without items.
func warnList(diags *diag.Diagnostics, summary, intro string, items []string) {
	if len(items) > 0 {
		diags.AddWarning(summary, intro+":\n  "+strings.Join(items, "\n  "))
	}
}

// observeAfter returns the fleet as the run left it: as the run read it last (RunResult.After),
// or, when the run stopped before it read the fleet (the Lease is held, the management cluster
// is unreachable), as the clusters say now (fleetresource.ReadAfter). nil when the fleet cannot
// be read at all.
func observeAfter(ctx context.Context, svc *delivery.Service, query fleet.Query, spec delivery.Spec, run *delivery.RunResult) *delivery.Observation {
	if run != nil && run.After != nil {
		return run.After
	}
	obs, ok := fleetresource.ReadAfter(ctx, func(ctx context.Context) (*delivery.Observation, error) {
		return svc.Observe(ctx, query, spec.Key, spec.RecordNamespace, false)
	})
	if !ok {
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
	fleetresource.FillUnknown(m, &observed)
	if read {
		m.private.Leaving = observed.private.Leaving
	}
	return diags
}

// Refresh reads the rollout's records and the fleet into state (see fleetresource.EngineOps); an
// imported rollout takes its configuration from the management cluster's record. It reports
// whether state was read (false: an early error left it unread).
func (r *rolloutResource) Refresh(ctx context.Context, state *Model, private fleetresource.PrivateGetter, diags *diag.Diagnostics) bool {
	if state.RecordNamespace.IsNull() {
		state.RecordNamespace = types.StringValue(defaultRecordNamespace)
	}
	key := records.Key{Kind: "rollout", Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	if state.Revision.IsNull() && !r.importConfig(ctx, state, key, diags) {
		return false
	}
	query, d := state.query(ctx, r.Data.Window())
	diags.Append(d...)
	diags.Append(state.loadMoving(ctx, private)...)
	if diags.HasError() {
		return false
	}
	svc, d := r.service(ctx, state)
	obs, ok := fleetresource.Refreshing(diags, svc, d, func(svc *delivery.Service) (*delivery.Observation, error) {
		return state.observe(ctx, svc, query, key)
	})
	if !ok {
		return false
	}
	diags.Append(state.setObserved(ctx, obs)...)
	state.settleMove(obs)
	diags.Append(state.readBridge(ctx, svc, key)...)
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

// Prepare reads, before a destroy reads the engine, which engine the rollout moves from: a
// rollout moving between engines is removed from both (see fleetresource.EngineOps).
func (r *rolloutResource) Prepare(ctx context.Context, state *Model, private fleetresource.PrivateGetter) diag.Diagnostics {
	return state.loadMoving(ctx, private)
}

// Service implements fleetresource.EngineOps (see service).
func (r *rolloutResource) Service(ctx context.Context, m *Model) (*delivery.Service, diag.Diagnostics) {
	return r.service(ctx, m)
}

// Destroy removes the rollout's objects and records from the fleet (see fleetresource.EngineOps); a
// rollout moving between engines is removed from both (Prepare read which it moves from).
func (r *rolloutResource) Destroy(ctx context.Context, state *Model, e fleetresource.Engine[delivery.Spec], private fleetresource.PrivateGetter, diags *diag.Diagnostics) {
	if !state.removeBridge(ctx, diags, e.Svc, e.Spec, private) {
		return
	}
	warnings, err := e.Svc.Destroy(ctx, delivery.DestroyRequest{
		Spec: e.Spec, Query: e.Query, Orphan: state.DeletionPolicy.ValueString() == "orphan", Logf: fleetresource.Logf(ctx),
		Adopted: func(note string) { diags.AddWarning("Objects Left In Place", note) },
	})
	fleetresource.DestroyOutcome(diags, warnings, err, "Rollout Delete Failed")
}
