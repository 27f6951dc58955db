package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// SettleTimeout bounds the work after a run ends (final records, the fleet read back for the
// state), which outlives the run's cancellation so that a cancelled apply still records and
// reports where it left each cluster, but must not hold the CLI on an unreachable cluster. One
// bound for every resource that runs through the engine: a rollout's run, an assignment's run
// and its modules' runs, and the read a resource makes when its run never got to read the fleet.
const SettleTimeout = 30 * time.Second

// RunRequest is one apply of a rollout.
type RunRequest struct {
	Spec  Spec
	Query fleet.Query
	// Only limits the run to these clusters when OnlyKnown (an assignment's module runs on the
	// clusters its plan picked).
	Only      []string
	OnlyKnown bool
	// Planned, when PlannedKnown, are the waves the plan showed: the run applies exactly those
	// (engine.Plan.Follow), so that apply does what the reviewed plan said even if the fleet
	// changed since; what differs is reported, and left for the next plan.
	Planned      [][]string
	PlannedKnown bool
	// Config is what the records keep of the configuration, so import can restore it.
	Config []byte
	// Leave removes the rollout from the clusters the plan listed as leaving (Leaving) once the
	// waves are done: their objects are deleted, or kept with Orphan, and their records removed.
	// Only clusters both listed and still leaving are touched: a cluster that started leaving
	// after the plan waits for the next plan, one that came back stays. Module assignments leave
	// clusters by their bindings instead.
	Leave, Orphan bool
	Leaving       []string
	// Create says the run is a resource's Create: it refuses when a Terraform state holds the
	// rollout already (Observation.Managed), with ImportHint (the import command) in the error.
	Create     bool
	ImportHint string
	Logf       func(msg string, fields map[string]any)
	// NoReadBack leaves the read of the fleet after the run to the caller, which reads it once
	// after all of its runs (an assignment, after its last module and its letting go): After is
	// then the fleet as the run read it under its Lease before it changed anything.
	NoReadBack bool
}

// RunResult is what a run did.
type RunResult struct {
	Plan   engine.Plan
	Result engine.Result
	// After is the clusters' state once the run ended: read after it settled; as the run read
	// it at its start when it stopped before changing anything, when that read fails, or with
	// RunRequest.NoReadBack.
	After *Observation
	// Adopted says, per cluster, which adopted objects restore or prune gave back instead of
	// deleting.
	Adopted []string
	// Kept says, per cluster, which objects prune left in place although the revision dropped
	// them, and why ("cluster: Kind ns/name: kept: reason").
	Kept []string
	// Gates says what the cluster gates saw change and did not blame on the revision (Nodes that
	// joined, were drained, deleted or lost during the wave), or that they could not read.
	Gates []string
	// Left lists the clusters the rollout was removed from (RunRequest.Leave); LeaveFailures
	// says where that did not complete (they stay leaving, for the next apply).
	Left, LeaveFailures []string
	// Moved lists the clusters the engine the rollout moves from let go of (Service.MovingFrom);
	// MoveFailures says where it did not yet (they are applied again by the next apply).
	Moved, MoveFailures []string
}

// Run applies the rollout: it takes the rollout's Lease, reads the records, refuses a revision in
// the invalid ledger (unless Spec.Retry), plans the waves and executes them, keeping the
// records and the progress record in step. The error says what failed where; the result is
// returned with it whenever the run started.
func (s *Service) Run(ctx context.Context, req RunRequest) (_ *RunResult, err error) {
	spec := req.Spec
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	if err := spec.policy(nil).Validate(); err != nil {
		return nil, usererr.Wrap(err, "Invalid Rollout Policy", "The rollout's settings cannot be used.")
	}
	holder := records.HolderIdentity()
	runCtx, release, err := s.HoldLease(ctx, spec.RecordNamespace, spec.Key, holder, "Rollout Already Running",
		"Another apply of rollout "+spec.Key.Describe()+" holds its Lease. Wait for it to finish; if that process died, the Lease expires on its own and the next apply takes over.")
	if err != nil {
		return nil, err
	}
	defer release()
	ctx = runCtx // cancelled, with the reason, if the Lease is lost
	defer func() { err = LeaseLost(runCtx, err, capitalize(spec.Key.Describe())) }()

	obs, plan, policy, early, err := s.planRun(ctx, &req) // renders req.Spec for the fleet as read
	if early != nil || err != nil {
		return early, err
	}
	w := s.runWorld(ctx, req, holder, obs, plan)
	stop := w.engine.start(ctx)
	defer stop()
	result := engine.Execute(ctx, plan, w, s.clock, policy)
	return s.finishRun(ctx, req, obs, plan, w, result)
}

// planRun reads the fleet under the run's Lease and plans what the run does, the way the plan
// did: refused, or the waves (following the planned ones when the plan made them). early is the
// result to return with err when the run stops here, before anything is written to a cluster.
func (s *Service) planRun(ctx context.Context, req *RunRequest) (obs *Observation, plan engine.Plan, policy engine.Policy, early *RunResult, err error) {
	spec := &req.Spec
	obs, err = s.Observe(ctx, req.Query, spec.Key, spec.RecordNamespace, false, spec.Ignore...)
	if err != nil {
		return nil, plan, policy, nil, err
	}
	stop := func(p engine.Plan, err error) (*Observation, engine.Plan, engine.Policy, *RunResult, error) {
		return obs, p, policy, &RunResult{Plan: p, After: obs}, err
	}
	// A failure the clusters' records hold and the ledger does not (its run could not write the
	// ledger) goes into the ledger now, while this run holds the Lease.
	if err := s.recordClusterFailures(ctx, *spec, obs.Ledger); err != nil {
		return stop(plan, err)
	}
	// Rendered again from the fleet as it reads now, the same way the plan rendered it: a
	// cluster that misses a variable now stops the run before anything is written.
	if err := spec.Render(obs.Discovery.Clusters); err != nil {
		return stop(plan, err)
	}
	if req.Create && obs.Managed {
		return stop(plan, AlreadyManaged(spec.Key.Describe(), req.ImportHint))
	}
	// Clusters whose records are gone but which hold objects of the rollout are held back as
	// the plan held them back (unrecorded.go), read again now: nothing there is restored to
	// nothing, pruned or deleted.
	s.markUnrecorded(ctx, spec.ClusterNamespace, spec.Key, obs, false, spec.ObjectsFor)
	// The same verdict as the plan's (Plan): refused, or kept only where it runs already and
	// what is left in flight undone.
	targets, refusal, _ := revisionVerdict(obs, HoldUnrecorded(obs.Targets, obs.Clusters, spec.AdoptUnrecorded), *spec)
	if refusal != nil {
		return stop(plan, refusal)
	}
	if req.OnlyKnown {
		targets = onlyTargets(targets, req.Only)
	}
	// The stages as the fleet reads now: a cluster relabelled into a later stage since the plan
	// waits, one the plan placed in a wave keeps it (Follow).
	policy = spec.policy(obs.Discovery)
	if req.PlannedKnown {
		// Clusters the plan repairs (drift found at refresh) are applied even if they look
		// current now; drift found since is for the next plan to show.
		planned := map[string]bool{}
		for _, wave := range req.Planned {
			for _, name := range wave {
				planned[name] = true
			}
		}
		plan = engine.PlanRollout(MarkDrifted(targets, planned), spec.Revision, policy).Follow(req.Planned, policy)
	} else {
		targets = MarkDrifted(targets, s.driftedOf(ctx, *spec, targets))
		plan = engine.PlanRollout(targets, spec.Revision, policy)
	}
	if gaps := plan.CanaryGaps(policy); len(gaps) > 0 {
		// Plan refused this already; here the fleet changed since (a canary went not ready).
		// Nothing has been changed yet, and the first wave must not go to the fleet instead.
		return stop(plan, usererr.New("Canary Not Available", CanaryGapsDetail(gaps)+
			"\n\nThe fleet changed since the plan; nothing was applied. Plan again once the canary is ready, or set canary_optional = true."))
	}
	// One owner per object, across record namespaces: objects another rollout or module
	// assignment applied (its field manager is on them) are refused before anything is written.
	// The plan checked the records of this record namespace (Claims); the clusters say the rest.
	if err := s.CheckOwners(ctx, *spec, plannedClusters(plan)); err != nil {
		return stop(plan, err)
	}
	return obs, plan, policy, nil, nil
}

// runWorld writes the run's progress record (every cluster it may change listed as placed
// before it is changed, so that a later run finds it when it leaves the selector) and returns
// the engine's World for it.
func (s *Service) runWorld(ctx context.Context, req RunRequest, holder string, obs *Observation, plan engine.Plan) *world {
	spec := req.Spec
	placed := slices.Clone(obs.Placed)
	for _, wave := range plan.Waves {
		placed = append(placed, wave...)
	}
	for name, st := range obs.Clusters {
		if st.Revision != "" || st.Backup != "" || st.State == StateProvisioning {
			placed = append(placed, name) // holds records already (e.g. applied before Placed was kept)
		}
	}
	slices.Sort(placed)
	placed = slices.Compact(placed)
	progress := &progressWriter{store: s.managementStore(spec.RecordNamespace), key: spec.Key, clock: s.clock, progress: records.Progress{
		Phase: records.PhaseRunning, Revision: spec.Revision, Waves: len(plan.Waves), StartedAt: s.clock.Now(),
		Holder: holder, Clusters: map[string]records.ClusterOutcome{}, Config: req.Config, Placed: placed,
		Managed: obs.Managed || !req.Create,
	}}
	progress.save(ctx)
	for _, note := range plan.Notes {
		req.Logf("plan: "+note, map[string]any{"rollout": spec.Key.String(), "revision": spec.Revision})
	}
	w := &world{svc: s, spec: spec, progress: progress, logf: req.Logf,
		hold: req.Query.Hold, clusters: clustersByName(obs.Discovery), untouched: untouchedOf(plan)}
	w.engine = s.engine.run(w)
	w.moving = obs.Moving
	return w
}

// finishRun removes the rollout from the clusters it leaves, records the run's end (progress
// record, ledger, Event) and reads the fleet again for the state. It runs even after
// cancellation (Ctrl-C), on a fresh context, but bounded: an unreachable cluster must not hold
// the CLI.
func (s *Service) finishRun(ctx context.Context, req RunRequest, obs *Observation, plan engine.Plan, w *world, result engine.Result) (*RunResult, error) {
	spec, progress, mstore := req.Spec, w.progress, s.managementStore(req.Spec.RecordNamespace)
	var left, leaveFailures, leftNotes []string
	leaving := PlannedLeaving(req.Leaving, obs.Leaving)
	if req.Leave && len(leaving) > 0 && ctx.Err() == nil {
		left, leaveFailures, leftNotes = s.leave(ctx, spec, leaving, req.Orphan, req.Logf)
		progress.mu.Lock()
		progress.progress.Placed = slices.DeleteFunc(progress.progress.Placed, func(n string) bool { return slices.Contains(left, n) })
		progress.mu.Unlock()
	}
	// Outlives cancellation: a cancelled apply still records and reports where it left each cluster.
	tail, cancel := context.WithTimeout(context.WithoutCancel(ctx), SettleTimeout)
	defer cancel()
	var moved, moveFailures []string
	if ctx.Err() == nil {
		// The engine moved from lets go of the clusters that verified on the new one (move.go).
		moved, moveFailures = s.letGo(ctx, spec, obs, result)
	}
	if result.Err() == nil {
		progress.mu.Lock()
		progress.progress.Managed = true // a run that completed is saved in a Terraform state
		progress.mu.Unlock()
	}
	progress.finish(tail, &result)
	if spec.Retry && result.Err() == nil {
		if err := mstore.ForgetInvalid(tail, spec.Key, spec.Revision); err != nil {
			return nil, fmt.Errorf("clear the ledger entry of %s: %w", spec.Revision, err)
		}
	}
	after := s.readBack(tail, req, obs)
	run := &RunResult{Plan: plan, Result: result, After: after, Adopted: append(w.Notes(), leftNotes...), Kept: w.Kept(), Gates: w.GateNotes(), Left: left, LeaveFailures: leaveFailures,
		Moved: moved, MoveFailures: moveFailures}
	if len(plan.Waves) > 0 || len(plan.Resume) > 0 || len(left) > 0 {
		reason, warning := records.EventReasonSucceeded, false
		switch {
		case result.Cancelled:
			reason, warning = records.EventReasonInterrupted, true
		case result.Err() != nil:
			reason, warning = records.EventReasonFailed, true
		}
		if eerr := mstore.Event(tail, spec.Key, warning, reason, run.Summary()); eerr != nil {
			req.Logf("event not written: "+eerr.Error(), map[string]any{"rollout": spec.Key.String(), "reason": reason})
		}
	}
	if err := result.Err(); err != nil {
		return run, usererr.Wrap(err, "Rollout Failed", fmt.Sprintf("%s did not complete revision %s.", capitalize(spec.Key.Describe()), spec.Revision))
	}
	return run, nil
}

// readBack reads the fleet as the run left it, for RunResult.After: obs (what the run read at
// its start) when the read fails or the caller reads it itself (RunRequest.NoReadBack).
func (s *Service) readBack(ctx context.Context, req RunRequest, obs *Observation) *Observation {
	if req.NoReadBack {
		return obs
	}
	spec := req.Spec
	after, err := s.Observe(ctx, req.Query, spec.Key, spec.RecordNamespace, false, spec.Ignore...)
	if err != nil {
		return obs
	}
	s.markUnrecorded(ctx, spec.ClusterNamespace, spec.Key, after, false, spec.ObjectsFor)
	return after
}

// Summary says in one line what the run did: the revision, how many clusters in how many waves,
// how each cluster ended and how long it took, e.g. "Revision 3f2a…: 12 clusters, 3 of 3 waves
// done in 2m10s: 11 succeeded, 1 failed".
func (r *RunResult) Summary() string {
	took := r.Result.Finished.Sub(r.Result.Started).Round(time.Second)
	if r.Result.Started.IsZero() || took < 0 {
		took = 0
	}
	s := fmt.Sprintf("Revision %s: %d clusters, %d of %d waves done in %s: %s",
		r.Plan.Desired, len(r.Result.Outcomes), r.Result.WavesDone, len(r.Plan.Waves), took, r.Result.CountsText())
	if n := len(r.Left); n > 0 {
		s += fmt.Sprintf("; left %d clusters", n)
	}
	return s
}

// plannedClusters lists the clusters plan's waves change.
func plannedClusters(plan engine.Plan) []string {
	var out []string
	for _, wave := range plan.Waves {
		out = append(out, wave...)
	}
	return out
}

// capitalize starts s with a capital letter, for a sentence that starts with a key's
// description ("rollout fleet/web" → "Rollout fleet/web").
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// PlannedLeaving is the clusters apply may let go of: those the plan listed (planned) that
// still leave (now). A cluster that started leaving after the plan is not in planned, and one
// that came back since is not in now.
func PlannedLeaving(planned, now []string) []string {
	var out []string
	for _, name := range planned {
		if slices.Contains(now, name) {
			out = append(out, name)
		}
	}
	return out
}

// AlreadyManaged is the refusal of a Create whose rollout a Terraform state holds already.
func AlreadyManaged(what, importHint string) error {
	return AlreadyExists(what, "Rollout Already Exists", importHint)
}

// AlreadyExists is the refusal, titled title, of a Create of what (a rollout or an assignment)
// whose records say a Terraform state holds it already.
func AlreadyExists(what, title, importHint string) error {
	detail := fmt.Sprintf("The records of %s in the management cluster say a Terraform state holds it already: an earlier apply "+
		"created it and completed. Creating it again here would give two states one rollout, and a destroy of either would "+
		"delete it from every cluster the other manages.", what)
	if importHint != "" {
		detail += "\n\nIf this configuration should manage it (the state was lost, or the configuration moved), import it instead:\n\n" + importHint
	} else {
		detail += " Import it instead."
	}
	detail += "\n\nIf another workspace manages it, give this one another name or namespace."
	return usererr.New(title, detail)
}

// leave removes the rollout from the clusters it left, by deletion policy. left are those done.
func (s *Service) leave(ctx context.Context, spec Spec, leaving []string, orphan bool, logf func(string, map[string]any)) (left, failures, notes []string) {
	failed, byCluster := s.removeFrom(ctx, spec, leaving, orphan, logf)
	for _, name := range leaving {
		if err, ok := failed[name]; ok {
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
		} else {
			left = append(left, name)
		}
	}
	for _, name := range sortedKeys(byCluster) {
		notes = append(notes, byCluster[name])
	}
	return left, failures, notes
}

// driftedOf checks, for targets already on the desired revision, whether their objects drifted
// or, for a rollout with values, render differently now than their records hold.
func (s *Service) driftedOf(ctx context.Context, spec Spec, targets []engine.Target) map[string]bool {
	return s.engine.drifted(s, ctx, spec, targets)
}

// drifted is driftedOf delivering directly: each cluster's live objects compared with the desired
// ones, and with values, the records' rendering with today's.
func (directEngine) drifted(s *Service, ctx context.Context, spec Spec, targets []engine.Target) map[string]bool {
	var names []string
	for _, t := range targets {
		if t.SkipReason == "" && t.Record.Current == spec.Revision && t.Record.Provisioning == "" {
			names = append(names, t.Name)
		}
	}
	var mu sync.Mutex
	out := map[string]bool{}
	s.forEach(ctx, names, func(ctx context.Context, name string) error {
		c, err := s.cluster(ctx, spec.ClusterNamespace, name, spec.Key, spec.ForceConflicts)
		if err != nil {
			return err
		}
		objs, err := spec.ObjectsFor(name)
		if err != nil {
			return err
		}
		if spec.Values != nil {
			state, err := records.NewWorkloadStore(c.client, spec.RecordNamespace).LoadCurrent(ctx, spec.Key)
			if err != nil {
				return err
			}
			set, _ := spec.SetFor(name) // rendered above (ObjectsFor)
			if state.Current != nil {
				if changed, err := RenderedChanges(state.Current.Manifests, set, false); err != nil || len(changed) > 0 {
					mu.Lock()
					out[name] = true
					mu.Unlock()
					return err
				}
			}
		}
		drifts, err := c.ignoring(spec.Ignore).applier.Drift(ctx, objs)
		if err == nil && len(drifts) > 0 {
			mu.Lock()
			out[name] = true
			mu.Unlock()
		}
		return err
	})
	return out
}

// RunsRevision reports whether any target is recorded current on revision.
func RunsRevision(targets []engine.Target, revision string) bool {
	for _, t := range targets {
		if t.Record.Current == revision {
			return true
		}
	}
	return false
}

// RefuseRevision returns targets with revision refused (it is in the invalid ledger): targets
// on it stay (not repaired), targets an earlier run left in flight are restored to their
// backup, and the others are skipped, saying why (see engine.Target.Refused).
func RefuseRevision(targets []engine.Target, revision string) []engine.Target {
	out := make([]engine.Target, len(targets))
	for i, t := range targets {
		t.Refused = "revision " + revision + " is recorded invalid; set retry_invalid = true to apply it here"
		out[i] = t
	}
	return out
}

func onlyTargets(targets []engine.Target, only []string) []engine.Target {
	keep := map[string]bool{}
	for _, n := range only {
		keep[n] = true
	}
	var out []engine.Target
	for _, t := range targets {
		if keep[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// LoadConfig returns the configuration the last run of key recorded (RunRequest.Config), or nil
// when the management cluster has no record of it.
func (s *Service) LoadConfig(ctx context.Context, key records.Key, recordNamespace string) ([]byte, error) {
	p, err := s.managementStore(recordNamespace).LoadProgress(ctx, key)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, nil
	}
	return p.Config, nil
}

// CanaryGapsDetail says which canaries a plan's canary waves miss and why, for plan and apply.
func CanaryGapsDetail(gaps []engine.CanaryGap) string {
	var b strings.Builder
	b.WriteString("Every listed canary must be in the first waves, so that a revision reaches the rest of the fleet only after it was verified on them. These canaries are not:")
	for _, g := range gaps {
		fmt.Fprintf(&b, "\n  - %s: %s", g.Name, g.Reason)
	}
	return b.String()
}

// recordClusterFailures writes to the ledger the failures only the clusters' own records hold
// (InvalidRevision.FromClusters), with the clusters and the evidence they recorded.
func (s *Service) recordClusterFailures(ctx context.Context, spec Spec, ledger []InvalidRevision) error {
	mstore := s.managementStore(spec.RecordNamespace)
	for _, l := range ledger {
		if !l.FromClusters {
			continue
		}
		reason := strings.TrimSuffix(l.Reason, fromClustersNote)
		if err := mstore.RecordInvalid(ctx, spec.Key, records.InvalidEntry{Revision: l.Revision, Reason: reason, Clusters: l.Clusters,
			RecordedAt: s.clock.Now()}); err != nil {
			return fmt.Errorf("write to the ledger the failure of %s that the clusters' records hold: %w", l.Revision, err)
		}
	}
	return nil
}
