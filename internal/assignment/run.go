package assignment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Logf logs one line of a run.
type Logf func(msg string, fields map[string]any)

// RunRequest is one apply of an assignment.
type RunRequest struct {
	Spec  Spec
	Query fleet.Query
	// Planned, when PlannedKnown, is what the plan showed, per module the clusters that get its
	// revision: the run applies each module to those clusters only (as far as they still need
	// it), so that apply does what the reviewed plan said.
	Planned      map[string][]string
	PlannedKnown bool
	// Waves, when PlannedKnown, are the waves the plan showed per module (as counts): each
	// module goes out in exactly those waves, less the clusters it is blocked on.
	Waves map[string][][]string
	// Config is kept in the management cluster so import can restore it.
	Config []byte
	// Leaving are the clusters the plan listed as leaving: the run lets go of those that still
	// leave and of no other (a cluster that started leaving after the plan waits for the next).
	Leaving []string
	// Create says the run is the resource's Create: it refuses an assignment a Terraform state
	// holds already, with ImportHint (the import command) in the error.
	Create     bool
	ImportHint string
	Logf       Logf
}

// RunResult is what a run left.
type RunResult struct {
	Bindings map[string][]records.ModuleBinding
	Skipped  map[string]string
	Warnings []string
	// Applied lists, per module, the clusters the run applied it to (whatever the outcome).
	Applied map[string][]string
	// Summaries says in one line per module delivered what its run did (delivery's
	// RunResult.Summary), for the end of the apply.
	Summaries []string
	// Moved says, one line per module, the clusters the engine the assignment moves from let go
	// of (move.go); MoveFailures, per module and cluster, where it did not yet (the next apply
	// applies them again).
	Moved, MoveFailures []string
	// After is the fleet as the run left it, for the state: read once at its end, after every
	// module and the letting go (no module's run reads it back: delivery.RunRequest.NoReadBack),
	// as a refresh reads it but without drift, which a refresh finds; as the run read it at its
	// start when it stopped before changing anything. nil when it could not be read.
	After *Observation
}

// Run applies the assignment: modules in depends_on order, each through delivery.Run on the
// clusters that need it and whose dependencies are applied; then modules no longer configured
// and clusters that stopped matching lose theirs by deletion policy; bindings follow every step.
// It runs in four steps on one scope: prepare (Lease, progress record, one read of the fleet,
// the clusters each module goes to, claims), deliver, let go, finish.
func Run(ctx context.Context, svc *delivery.Service, req RunRequest) (_ *RunResult, err error) {
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	spec := req.Spec
	runCtx, release, err := svc.HoldLease(ctx, spec.RecordNamespace, spec.Key, records.HolderIdentity(), "Assignment Already Running",
		"Another apply of "+spec.Key.Describe()+" holds its Lease. Wait for it to finish; if that process died, the Lease expires on its own.")
	if err != nil {
		return nil, err
	}
	defer release()
	defer func() { err = delivery.LeaseLost(runCtx, err, "Assignment "+spec.Key.Describe()) }()
	r := newRun(runCtx, svc, req, clock.System{}.Now, delivery.SettleTimeout)
	defer r.stopSettling()
	return r.execute(runCtx)
}

// execute runs the four steps on ctx, the scope of the run's Lease (runCtx).
func (r *run) execute(ctx context.Context) (*RunResult, error) {
	if err := r.prepare(ctx); err != nil {
		return r.partial(), err
	}
	r.deliver(ctx)
	r.letGo(ctx)
	res, err := r.finish(ctx)
	res.After = r.readAfter(ctx)
	return res, err
}

// run is one Run of an assignment: what it read, decided and did so far.
type run struct {
	svc  deliverer
	req  RunRequest
	spec Spec
	now  func() time.Time

	mstore *records.ManagementStore
	bstore *records.BindingStore
	// settle is what the run writes on: it outlives the run's context by delivery.SettleTimeout
	// (clock.Outlive), so that a cancelled run still records where each cluster is, for a bounded
	// time (with the run's write fence: nothing is written once the Lease may be another
	// apply's).
	settle       context.Context
	stopSettling context.CancelFunc
	settleFor    time.Duration

	managed    bool
	obs        *Observation
	plan       BindingPlan
	candidates map[string][]string                         // per module: the clusters it may go to
	bound      map[string]map[string]records.ModuleBinding // cluster → module → binding now
	res        *RunResult
	failures   []string
}

// newRun starts a run's scope on ctx; its writes outlive ctx by settle.
func newRun(ctx context.Context, svc deliverer, req RunRequest, now func() time.Time, settle time.Duration) *run {
	mc := svc.ManagementClient()
	// Outlives cancellation, by settle at most: a cancelled run still records where each cluster is.
	settleCtx, stop := clock.Outlive(ctx, clock.System{}, settle)
	return &run{
		svc: svc, req: req, spec: req.Spec, now: now, settleFor: settle,
		mstore: records.NewManagementStore(mc, req.Spec.RecordNamespace), bstore: records.NewBindingStore(mc, req.Spec.RecordNamespace),
		settle: settleCtx, stopSettling: stop,
		bound: map[string]map[string]records.ModuleBinding{},
		res:   &RunResult{Applied: map[string][]string{}},
	}
}

// prepare refuses a second create, marks the assignment running, reads the fleet once, and
// decides which clusters each module may go to; it refuses objects another owner manages there.
func (r *run) prepare(ctx context.Context) error {
	spec := r.spec
	prev, err := r.mstore.LoadProgress(ctx, spec.Key)
	if err != nil {
		return fmt.Errorf("read the progress record of %s: %w", spec.Key.Describe(), err)
	}
	r.managed = prev != nil && prev.Managed
	if r.req.Create && r.managed {
		return delivery.AlreadyExists(spec.Key.Describe(), "Module Assignment Already Exists", r.req.ImportHint)
	}
	// Managed (records.Progress) stays set once a state holds the assignment: an update says so,
	// a create once it completes.
	r.managed = r.managed || !r.req.Create
	if err := r.mstore.SaveProgress(ctx, spec.Key, records.Progress{Phase: records.PhaseRunning, StartedAt: r.now(), Config: r.req.Config, Managed: r.managed}); err != nil {
		return fmt.Errorf("record %s: %w", spec.Key.Describe(), err)
	}
	if r.obs, err = observe(ctx, r.svc, r.req.Query, spec, false); err != nil {
		return err
	}
	// Rendered from the fleet as it reads now, as the plan rendered it: a cluster that misses a
	// variable now stops the run before anything is applied anywhere. r.spec shares the modules
	// with spec, so every module's run gets what was rendered here.
	if err := r.spec.Render(r.obs.Clusters); err != nil {
		return err
	}
	r.res.Skipped = r.obs.Skipped
	for cluster, bs := range r.obs.Bindings {
		r.bound[cluster] = map[string]records.ModuleBinding{}
		for _, b := range bs {
			r.bound[cluster][b.Module] = b
		}
	}
	r.plan = PlanAssignment(r.obs, spec, nil)
	r.candidates = Candidates(spec, r.obs, r.plan, r.req.Planned, r.req.PlannedKnown)
	// The plan refused this already; here the fleet changed since (a canary went not ready).
	// Nothing has been changed yet, and a module's first wave must not go to the fleet instead.
	if err := CanaryRefusal(CanaryGaps(r.obs, BindingPlan{Apply: r.candidates}, spec), "Canary Not Available",
		"The fleet changed since the plan; nothing was applied. Plan again once the canary is ready, or set canary_optional = true."); err != nil {
		return err
	}
	return checkClaims(ctx, r.svc, spec, r.candidates)
}

// Candidates are, per module, the clusters a run may take it to: the plan's, as far as they are
// still eligible (one that joined since the plan waits for the next plan; one the plan repairs is
// applied again even if it looks current), or, without a plan, the clusters that need it. In
// Reconcile mode without a plan that is every eligible cluster: delivery repairs drift on
// clusters already current.
func Candidates(spec Spec, obs *Observation, plan BindingPlan, planned map[string][]string, plannedKnown bool) map[string][]string {
	eligible := map[string]bool{}
	for _, c := range obs.Eligible {
		eligible[c] = true
	}
	out := map[string][]string{}
	for _, m := range spec.Modules {
		if !plannedKnown {
			out[m.Name] = plan.Apply[m.Name]
			if spec.Mode == Reconcile {
				out[m.Name] = obs.Eligible
			}
			continue
		}
		var cs []string
		for _, c := range planned[m.Name] {
			if eligible[c] {
				cs = append(cs, c)
			}
		}
		out[m.Name] = cs
	}
	return out
}

// setBinding records b for cluster, in the run's view and in the management cluster.
func (r *run) setBinding(cluster string, b records.ModuleBinding) error {
	if r.bound[cluster] == nil {
		r.bound[cluster] = map[string]records.ModuleBinding{}
	}
	r.bound[cluster][b.Module] = b
	if err := records.Fenced(r.settle); err != nil {
		return err // the Lease is lost: another apply may be writing these bindings now
	}
	return r.bstore.Update(r.settle, r.spec.Key, cluster, func(old []records.ModuleBinding) []records.ModuleBinding {
		out := slices.DeleteFunc(old, func(o records.ModuleBinding) bool { return o.Module == b.Module })
		return append(out, b)
	})
}

// deliver takes each module, in depends_on order, to its candidates whose dependencies are
// applied there; the others are bound as blocked.
func (r *run) deliver(ctx context.Context) {
	for _, m := range r.spec.Modules {
		if ctx.Err() != nil {
			return
		}
		var targets []string
		for _, cluster := range r.candidates[m.Name] {
			if dep, why := blockedBy(r.bound[cluster], m); dep != "" {
				if err := r.setBinding(cluster, records.ModuleBinding{Module: m.Name, Revision: m.Revision, Result: records.BindingBlocked,
					Reason: fmt.Sprintf("depends on module %s, which is %s", dep, why)}); err != nil {
					r.failures = append(r.failures, fmt.Sprintf("module %s: %v", m.Name, err))
					return
				}
				continue
			}
			targets = append(targets, cluster)
		}
		if len(targets) == 0 {
			continue
		}
		r.res.Applied[m.Name] = targets
		r.req.Logf(fmt.Sprintf("module %s revision %s: %d cluster(s)", m.Name, m.Revision, len(targets)), map[string]any{"assignment": r.spec.Key.String(), "clusters": targets})
		// The fleet is read back once, after the last module (readAfter), not after each.
		dr := delivery.RunRequest{Spec: r.spec.moduleSpec(m), Query: r.req.Query, Only: targets, OnlyKnown: true, Logf: r.req.Logf, NoReadBack: true}
		dr.Spec.CheckJob = CheckJobAfter(r.spec, m.Name, r.candidates, targets)
		if waves, ok := r.req.Waves[m.Name]; ok && r.req.PlannedKnown {
			dr.Planned, dr.PlannedKnown = onlyIn(waves, targets), true
		}
		out, err := r.svc.Run(ctx, dr)
		if out != nil {
			for _, o := range out.Result.Outcomes {
				prev, bound := r.bound[o.Target][m.Name]
				if b, changed := BindingFor(o, m, prev, bound, r.now()); changed {
					err = errors.Join(err, r.setBinding(o.Target, b))
				}
			}
			r.res.Summaries = append(r.res.Summaries, fmt.Sprintf("module %s: %s", m.Name, out.Summary()))
			moved, failures := moveLines(m.Name, out)
			r.res.Moved, r.res.MoveFailures = append(r.res.Moved, moved...), append(r.res.MoveFailures, failures...)
			for _, w := range slices.Concat(out.Result.Warnings(), out.Adopted, out.Kept, out.Gates, heldUnrecorded(out)) {
				r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("module %s: %s", m.Name, w))
			}
		}
		if err != nil {
			r.failures = append(r.failures, fmt.Sprintf("module %s: %v", m.Name, err))
		}
	}
}

// CheckJobAfter is the check Job of module's run to targets: it runs on each of targets where
// module is the last module of the run (no later one, in depends_on order, goes there), so
// that a cluster runs it once, after every module delivered to it verified, and its failure
// fails that module there, restored as for any failed verification. nil without a check Job
// or where it runs nowhere.
func CheckJobAfter(spec Spec, module string, candidates map[string][]string, targets []string) *delivery.CheckJob {
	if spec.CheckJob == nil {
		return nil
	}
	later := map[string]bool{}
	seen := false
	for _, m := range spec.Modules {
		if seen {
			for _, c := range candidates[m.Name] {
				later[c] = true
			}
		}
		seen = seen || m.Name == module
	}
	job := *spec.CheckJob
	job.Only = map[string]bool{}
	for _, c := range targets {
		if !later[c] {
			job.Only[c] = true
		}
	}
	if len(job.Only) == 0 {
		return nil
	}
	return &job
}

// BindingFor is the binding a module's outcome on a cluster leaves, and whether it differs from
// prev (the binding before, if bound): applied with the time now (truncated to the second) when
// it succeeded or was already current, failed with the reason when it did not complete there.
// An outcome that changed nothing there (not started, gone, skipped) leaves the binding as it
// was.
func BindingFor(o engine.Outcome, m Module, prev records.ModuleBinding, bound bool, now time.Time) (records.ModuleBinding, bool) {
	applied := records.ModuleBinding{Module: m.Name, Revision: m.Revision, AppliedAt: now.UTC().Truncate(time.Second), Result: records.BindingApplied}
	switch o.Status {
	case engine.StatusSucceeded:
		return applied, true
	case engine.StatusAlreadyCurrent:
		if bound && prev.Revision == m.Revision && prev.Result == records.BindingApplied {
			return prev, false
		}
		return applied, true
	case engine.StatusFailed, engine.StatusRolledBack, engine.StatusCancelled, engine.StatusUnsettled, engine.StatusRestored, engine.StatusLostContact:
		return records.ModuleBinding{Module: m.Name, Revision: m.Revision, Result: records.BindingFailed, Reason: o.Error}, true
	}
	return prev, false
}

// letGo lets go of what the plan listed (modules no longer configured, clusters leaving, and
// the bindings of deleted clusters), unless the run was cancelled.
func (r *run) letGo(ctx context.Context) {
	if ctx.Err() != nil {
		r.failures = append(r.failures, "cancelled: "+context.Cause(ctx).Error())
		return
	}
	// Only the clusters the plan listed are let go of; the others wait for the next plan.
	r.plan.Leaving = delivery.PlannedLeaving(r.req.Leaving, r.plan.Leaving)
	r.res.Warnings = append(r.res.Warnings, letGo(ctx, r.svc, r.spec, r.obs, r.plan, r.bstore, &r.failures)...)
}

// partial is the result of a run that stopped before it delivered anything.
func (r *run) partial() *RunResult {
	if r.obs == nil {
		return nil
	}
	// Nothing was changed: the fleet is as prepare read it.
	return &RunResult{Bindings: r.obs.Bindings, Skipped: r.obs.Skipped, After: r.obs}
}

// readAfter reads the fleet as the run left it, once, for the state (RunResult.After). It
// outlives the run's cancellation by the settle bound (counted from now when the run was
// cancelled already): the state of a cancelled apply should say what the clusters hold.
func (r *run) readAfter(ctx context.Context) *Observation {
	rctx, cancel := clock.Outlive(ctx, clock.System{}, r.settleFor)
	defer cancel()
	obs, err := observe(rctx, r.svc, r.req.Query, r.spec, false)
	if err != nil {
		return nil
	}
	return obs
}

// finish reads the bindings as the run left them and records how it ended.
func (r *run) finish(ctx context.Context) (*RunResult, error) {
	after, err := r.bstore.List(r.settle, r.spec.Key)
	if err != nil {
		return r.res, err
	}
	r.res.Bindings = onlyConfigured(after, r.spec)
	phase := records.PhaseSucceeded
	if len(r.failures) > 0 {
		phase = records.PhaseFailed
	}
	if records.Fenced(ctx) == nil {
		_ = r.mstore.SaveProgress(r.settle, r.spec.Key, records.Progress{Phase: phase, UpdatedAt: r.now(), Config: r.req.Config,
			Managed: r.managed || len(r.failures) == 0})
	}
	if len(r.failures) > 0 {
		return r.res, usererr.New("Module Assignment Failed",
			fmt.Sprintf("%s did not complete:\n  %s\nFailed modules were restored on the clusters where they failed, and modules that depend on them were not applied there.",
				r.spec.Key.Describe(), strings.Join(r.failures, "\n  ")))
	}
	return r.res, nil
}

// blockedBy returns a dependency of m that is not applied on the cluster, and its state.
func blockedBy(bound map[string]records.ModuleBinding, m Module) (string, string) {
	for _, d := range m.DependsOn {
		b, ok := bound[d]
		switch {
		case !ok:
			return d, "not applied"
		case b.Result != records.BindingApplied:
			return d, string(b.Result)
		}
	}
	return "", ""
}

// letGo removes modules that are no longer configured, and everything from clusters that stopped
// matching (by deletion policy), and drops the bindings of deleted clusters.
func letGo(ctx context.Context, svc deliverer, spec Spec, obs *Observation, plan BindingPlan, bstore *records.BindingStore, failures *[]string) []string {
	var warnings []string
	for _, name := range sortedNames(plan.Removed) {
		// A cluster that cannot be changed now keeps the module and its binding, so that a later
		// apply finishes the removal: dropping the binding would leave the module's objects there
		// with nothing that remembers them.
		var reachable []string
		for _, cluster := range plan.Removed[name] {
			if reason, skipped := obs.Skipped[cluster]; skipped {
				warnings = append(warnings, fmt.Sprintf("%s: %s; module %s stays there until a later apply can remove it", cluster, reason, name))
				continue
			}
			reachable = append(reachable, cluster)
		}
		if len(reachable) == 0 {
			continue
		}
		ws, err := svc.Destroy(ctx, delivery.DestroyRequest{
			Spec: removedSpec(spec, name), Query: fleet.Query{Namespace: spec.ClusterNamespace, Names: reachable}, Orphan: spec.Orphan,
			Adopted: func(note string) { warnings = append(warnings, note) }, // ws then names unreachable clusters only
		})
		warnings = append(warnings, ws...)
		if err != nil {
			*failures = append(*failures, fmt.Sprintf("remove module %s: %v", name, err))
			continue
		}
		if len(ws) > 0 {
			continue // a cluster became unreachable since the run began: every binding stays, the next apply retries
		}
		for _, cluster := range reachable {
			if err := bstore.Update(ctx, spec.Key, cluster, func(old []records.ModuleBinding) []records.ModuleBinding {
				return slices.DeleteFunc(old, func(b records.ModuleBinding) bool { return b.Module == name })
			}); err != nil {
				*failures = append(*failures, err.Error())
			}
		}
	}
	for _, cluster := range plan.Leaving {
		ws, err := release(ctx, svc, spec, cluster, obs.Bindings[cluster], func(note string) { warnings = append(warnings, note) })
		warnings = append(warnings, ws...)
		if err != nil {
			*failures = append(*failures, fmt.Sprintf("cluster %s left: %v", cluster, err))
			continue
		}
		if len(ws) > 0 {
			continue // unreachable: its binding stays so a later apply finishes the job
		}
		if err := bstore.Delete(ctx, spec.Key, cluster); err != nil {
			*failures = append(*failures, err.Error())
		}
	}
	for _, cluster := range plan.Gone {
		if err := bstore.Delete(ctx, spec.Key, cluster); err != nil {
			*failures = append(*failures, err.Error())
		}
	}
	return warnings
}

// release removes from cluster every module bound there, dependents first. noted is told what was
// left in place on purpose (adopted objects given back, what Flux never prunes); the warnings
// returned name only what could not be reached.
func release(ctx context.Context, svc deliverer, spec Spec, cluster string, bound []records.ModuleBinding, noted func(string)) ([]string, error) {
	order := bindingOrder(spec, bound)
	var warnings []string
	for i := len(order) - 1; i >= 0; i-- {
		ws, err := svc.Destroy(ctx, delivery.DestroyRequest{
			Spec: removedSpec(spec, order[i]), Query: fleet.Query{Namespace: spec.ClusterNamespace, Names: []string{cluster}},
			Orphan: spec.Orphan, KeepManagementRecords: true, Adopted: noted,
		})
		warnings = append(warnings, ws...)
		if err != nil {
			return warnings, err
		}
	}
	return warnings, nil
}

// bindingOrder lists bound module names in the configured depends_on order, unconfigured ones last.
func bindingOrder(spec Spec, bound []records.ModuleBinding) []string {
	has := map[string]bool{}
	for _, b := range bound {
		has[b.Module] = true
	}
	var out []string
	for _, m := range spec.Modules {
		if has[m.Name] {
			out = append(out, m.Name)
			delete(has, m.Name)
		}
	}
	return append(out, sortedNames(has)...)
}

// removedSpec is enough of a module's delivery spec to remove it.
func removedSpec(spec Spec, module string) delivery.Spec {
	return delivery.Spec{Key: spec.ModuleKey(module), ClusterNamespace: spec.ClusterNamespace, RecordNamespace: spec.RecordNamespace, Policy: spec.Policy}
}

// onlyConfigured keeps the bindings of picked clusters (and of left clusters still holding
// modules) for configured modules.
func onlyConfigured(bindings map[string][]records.ModuleBinding, spec Spec) map[string][]records.ModuleBinding {
	out := map[string][]records.ModuleBinding{}
	for cluster, bs := range bindings {
		var kept []records.ModuleBinding
		for _, b := range bs {
			if _, ok := spec.Module(b.Module); ok {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			out[cluster] = kept
		}
	}
	return out
}

// Destroy removes every module from every cluster that has it or is picked (by deletion
// policy), dependents first, then the bindings and the assignment's record.
func Destroy(ctx context.Context, svc *delivery.Service, spec Spec, q fleet.Query, logf Logf, noted func(string)) ([]string, error) {
	mc := svc.ManagementClient()
	bstore := records.NewBindingStore(mc, spec.RecordNamespace)
	bindings, err := bstore.List(ctx, spec.Key)
	if err != nil {
		return nil, err
	}
	found, err := svc.Discover(ctx, q)
	if err != nil {
		return nil, err
	}
	clusters := map[string]bool{}
	all := map[string]bool{}
	for c, bs := range bindings {
		clusters[c] = true
		for _, b := range bs {
			all[b.Module] = true
		}
	}
	for _, c := range found.Clusters {
		clusters[c.Name] = true
	}
	var modules []records.ModuleBinding
	for _, m := range spec.Modules {
		all[m.Name] = true
	}
	for name := range all {
		modules = append(modules, records.ModuleBinding{Module: name})
	}
	order := bindingOrder(spec, modules)
	names := sortedNames(clusters)
	var warnings []string
	for i := len(order) - 1; i >= 0; i-- {
		if len(names) == 0 {
			break
		}
		ws, err := svc.Destroy(ctx, delivery.DestroyRequest{
			Spec: removedSpec(spec, order[i]), Query: fleet.Query{Namespace: spec.ClusterNamespace, Names: names}, Orphan: spec.Orphan, Logf: logf,
			Adopted: noted, // left in place on purpose: not a cluster that could not be reached
		})
		warnings = append(warnings, ws...)
		if err != nil {
			return warnings, fmt.Errorf("module %s: %w", order[i], err)
		}
	}
	if len(warnings) > 0 {
		return warnings, usererr.New("Module Assignment Delete Incomplete",
			"Some clusters could not be reached, so they keep their modules and bindings:\n  "+strings.Join(warnings, "\n  ")+"\nRun destroy again once they are reachable.")
	}
	if err := bstore.DeleteAll(ctx, spec.Key); err != nil {
		return warnings, err
	}
	return warnings, records.NewManagementStore(mc, spec.RecordNamespace).Delete(ctx, spec.Key)
}

// onlyIn returns waves without the clusters not in keep, and without emptied waves.
func onlyIn(waves [][]string, keep []string) [][]string {
	out := [][]string{}
	for _, wave := range waves {
		var kept []string
		for _, c := range wave {
			if slices.Contains(keep, c) {
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

// heldUnrecorded lists the clusters a module's run held back because the module's records are
// gone there while its objects are not (delivery.StateRecordsMissing), as "cluster: reason": a
// skipped cluster is no warning of the engine's, but this one waits for the user.
func heldUnrecorded(out *delivery.RunResult) []string {
	if out.After == nil {
		return nil
	}
	var lines []string
	missing := out.After.RecordsMissing()
	for _, o := range out.Result.Outcomes {
		if reason, ok := missing[o.Target]; ok && o.Status == engine.StatusSkipped {
			lines = append(lines, o.Target+": "+reason)
		}
	}
	return lines
}
