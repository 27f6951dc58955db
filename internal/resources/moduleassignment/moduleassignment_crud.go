package moduleassignment

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// ApplyPlan runs the assignment and fills plan's computed attributes from the outcome (see
// fleetresource.EngineOps). As for rollouts, a failed Create saves no state: the records and bindings
// keep what was applied, and the next Create continues from them.
func (r *assignmentResource) ApplyPlan(ctx context.Context, plan *Model, e fleetresource.Engine[assignment.Spec], diags *diag.Diagnostics, create bool) bool {
	spec, query, svc := e.Spec, e.Query, e.Svc
	// The waves the plan showed are the waves apply carries out: their clusters come with the
	// plan's private state (none when the plan could not plan them, e.g. on create).
	waves, leaving := plan.private.PlannedWaves, plan.private.PlannedLeaving
	plan.private.PlannedWaves, plan.private.PlannedLeaving = nil, nil // carried out once
	config, d := plan.configRecord(ctx)
	diags.Append(d...)
	res, err := runChecked(ctx, svc, assignment.RunRequest{
		Spec: spec, Query: query, Planned: flatten(waves), PlannedKnown: waves != nil, Waves: waves, Config: config,
		Leaving: leaving, Create: create, ImportHint: importHint(spec.Key), Logf: fleetresource.Logf(ctx),
	})
	if res != nil {
		for _, w := range res.Warnings {
			diags.AddWarning("Module Assignment Warning", w)
		}
		if len(res.Summaries) > 0 {
			diags.AddWarning("Module Assignment Summary", strings.Join(res.Summaries, "\n"))
		}
	}
	diags.Append(plan.settleOutcome(ctx, svc, query, spec, res)...)
	if res != nil {
		warnMoved(diags, res)
		plan.settleMove(res.After)
	}
	applyBridge(ctx, diags, svc, plan, spec, query, res)
	return fleetresource.Outcome(diags, err, "Module Assignment Failed")
}

// SetConfigured fills the attributes that follow from the configuration alone: the id, the
// revisions and, when the plan left them unknown, the objects (fleetresource.EngineModel).
func (m *Model) SetConfigured(ctx context.Context, spec assignment.Spec) (diags diag.Diagnostics) {
	m.ID = types.StringValue(spec.Key.Namespace + "/" + spec.Key.Name)
	m.setRevisions(spec)
	if m.Objects.IsUnknown() {
		diags.Append(m.setObjects(ctx, spec)...)
	}
	if m.SensitiveObjects.IsUnknown() {
		diags.Append(m.setSensitiveObjects(ctx)...)
	}
	return diags
}

// runChecked runs the assignment (see fleetresource.RunChecked), as a rollout's. The plan showed each
// module's digest, computed from its manifests.
func runChecked(ctx context.Context, svc *delivery.Service, req assignment.RunRequest) (*assignment.RunResult, error) {
	return fleetresource.RunChecked(ctx, svc, func() error { return assignment.CheckPinned(ctx, svc, req.Spec, plannedModules(req.Waves)) },
		func() (*assignment.RunResult, error) { return assignment.Run(ctx, svc, req) })
}

// settleOutcome fills the attributes the plan left unknown from what apply left (res, nil when
// the run did not start): the fleet as the run read it at its end (afterRun), without drift,
// which a refresh finds. Only what the plan left unknown is filled in: a value the plan showed
// is a promise.
func (m *Model) settleOutcome(ctx context.Context, svc *delivery.Service, query fleet.Query, spec assignment.Spec, res *assignment.RunResult) diag.Diagnostics {
	var diags diag.Diagnostics
	observed := *m
	if after := afterRun(ctx, svc, query, spec, res); after != nil {
		diags.Append(observed.setObserved(ctx, after, spec)...)
	} else {
		// The fleet cannot be read now: the state says so much as is known; the next refresh
		// reads the rest.
		var skipped map[string]string
		if res != nil {
			skipped = res.Skipped
		}
		diags.Append(observed.setObserved(ctx, &assignment.Observation{Skipped: skipped}, spec)...)
		if m.private.Clusters != nil {
			observed.private.Clusters = m.private.Clusters
		}
	}
	m.private.Clusters = observed.private.Clusters
	// What the run did, rather than what the fleet reads now: the waves carried out and the
	// clusters let go of (none: an assignment lets go of them by their bindings). The rest
	// comes from what apply left.
	if m.Leaving.IsUnknown() {
		m.setLeaving(nil)
	}
	if m.Waves.IsUnknown() {
		var applied map[string][]string
		if res != nil {
			applied = res.Applied
		}
		m.setWaves(assignment.Waves(assignment.BindingPlan{Apply: applied}, spec), spec.Policy.Canary)
	}
	fleetresource.FillUnknown(m, &observed)
	return diags
}

// afterRun is the fleet as the run left it: as the run read it at its end (RunResult.After,
// nil when it could not), or, when the run did not start (the Lease is held, the delivery
// engine is not ready), as the clusters say now (fleetresource.ReadAfter). nil when it cannot
// be read.
func afterRun(ctx context.Context, svc *delivery.Service, query fleet.Query, spec assignment.Spec, res *assignment.RunResult) *assignment.Observation {
	if res != nil {
		return res.After
	}
	obs, ok := fleetresource.ReadAfter(ctx, func(ctx context.Context) (*assignment.Observation, error) {
		return assignment.Observe(ctx, svc, query, spec, false)
	})
	if !ok {
		return nil
	}
	return obs
}

// importHint is the import command (and block) for one that exists already.
func importHint(key records.Key) string {
	return fleetresource.ImportHint("gradual_module_assignment", key)
}

// flatten returns, per module, the clusters of its waves.
func flatten(waves map[string][][]string) map[string][]string {
	if waves == nil {
		return nil
	}
	out := map[string][]string{}
	for m, ws := range waves {
		for _, w := range ws {
			out[m] = append(out[m], w...)
		}
	}
	return out
}

// Refresh reads the assignment's records, bindings and the fleet into state (see
// fleetresource.EngineOps); an imported assignment takes its configuration from the management
// cluster's record. It reports whether state was read (false: an early error left it
// unread).
func (r *assignmentResource) Refresh(ctx context.Context, state *Model, private fleetresource.PrivateGetter, diags *diag.Diagnostics) bool {
	if state.RecordNamespace.IsNull() {
		state.RecordNamespace = types.StringValue(defaultRecordNamespace)
	}
	state.defaultChangeAttributes()
	if state.Modules.IsNull() && !r.importConfig(ctx, state, diags) {
		return false
	}
	spec, d := state.spec(ctx)
	diags.Append(d...)
	state.keepSensitiveRevisions(ctx, &spec)
	query, d := state.query(ctx, r.Data.Window())
	diags.Append(d...)
	diags.Append(state.loadMoving(ctx, private)...)
	svc, d := r.Service(ctx, state)
	obs, ok := fleetresource.Refreshing(diags, svc, d, func(svc *delivery.Service) (*assignment.Observation, error) {
		return assignment.Observe(ctx, svc, query, spec, true)
	})
	if !ok {
		return false
	}
	state.setRevisions(spec)
	if state.Objects.IsNull() {
		// Imported, or written by a version without `objects`: filled here so that the next
		// plan, which works them out the same way (but with the sensitive halves), shows no change.
		diags.Append(state.setObjects(ctx, spec)...)
	}
	diags.Append(state.setObserved(ctx, obs, spec)...)
	state.settleMove(obs)
	diags.Append(state.readBridge(ctx, svc, spec)...)
	if state.Leaving.IsNull() || state.Leaving.IsUnknown() {
		state.setLeaving(nil) // imported, or written by a version without `leaving`
	}
	if state.Waves.IsNull() || state.Waves.IsUnknown() {
		state.setWaves(nil, nil) // imported: no apply yet
	}
	return true
}

// importConfig fills an imported assignment from the management cluster's record. It reports
// whether it did.
func (r *assignmentResource) importConfig(ctx context.Context, state *Model, diags *diag.Diagnostics) bool {
	key := state.key()
	found := r.ImportedRecord(ctx, key, state.RecordNamespace.ValueString(), diags)
	if found == nil {
		return false
	}
	diags.Append(state.fromConfigRecord(ctx, found)...)
	return !diags.HasError()
}

// Prepare implements fleetresource.EngineOps: it reads, before a destroy reads the engine,
// which engine the assignment moves from (an assignment moving between engines is removed from
// both); the rest of the private state is read in Destroy.
func (r *assignmentResource) Prepare(ctx context.Context, state *Model, private fleetresource.PrivateGetter) diag.Diagnostics {
	return state.loadMoving(ctx, private)
}

// Service is the delivery service for m (fleetresource.EngineOps): direct, or through Flux with `delivery.flux`. Every
// module goes through it: one artifact per module revision (with values its template), one
// OCIRepository per module revision per namespace, one Kustomization per (module, cluster).
func (r *assignmentResource) Service(ctx context.Context, m *Model) (*delivery.Service, diag.Diagnostics) {
	svc, diags := fleetresource.Service(ctx, r.Data.Delivery, m.Delivery, m.registry)
	return m.moving(svc), diags
}

// Destroy removes the assignment's bridge, objects and records (see fleetresource.EngineOps).
func (r *assignmentResource) Destroy(ctx context.Context, state *Model, e fleetresource.Engine[assignment.Spec], private fleetresource.PrivateGetter, diags *diag.Diagnostics) {
	// The bridge goes first: a cluster joining during the destroy must not get modules the
	// destroy is removing. An assignment that never had one asks nothing of Cluster API's API.
	diags.Append(state.LoadPrivate(ctx, private)...)
	if e.Spec.FollowJoins != nil || state.private.Bridged != nil {
		if err := assignment.RemoveBridge(ctx, e.Svc, e.Spec); err != nil {
			diags.Append(diagnostics.FromError(err, "Module Assignment Delete Failed"))
			return
		}
	}
	warnings, err := assignment.Destroy(ctx, e.Svc, e.Spec, e.Query, fleetresource.Logf(ctx),
		func(note string) { diags.AddWarning("Objects Left In Place", note) })
	fleetresource.DestroyOutcome(diags, warnings, err, "Module Assignment Delete Failed")
}

// plannedModules are the modules the plan's waves deliver; nil when the plan could not plan them
// (apply then plans, and may deliver any module).
func plannedModules(waves map[string][][]string) []string {
	if waves == nil {
		return nil
	}
	modules := make([]string, 0, len(waves))
	for m := range waves {
		modules = append(modules, m)
	}
	return modules
}
