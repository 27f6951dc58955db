package fleetupdate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// ApplyRequest is one apply of an in-place update, of either form (Spec.Owner).
type ApplyRequest struct {
	Spec Spec
	// Shown is what the plan showed of the single-owner form's machines (nil when the plan
	// could not show them: inputs unknown at plan); Apply refuses a plan gone stale against it.
	Shown map[string]Shown
	// Planned are the waves the plan showed (nil when it could not say them: a create, or a
	// change of the clusters picked); apply carries out these and no others.
	Planned [][]string
	// Strategies are the machines' strategies the plan was made with (nil: those found when apply
	// starts).
	// Each wave is checked against it before it is written.
	Strategies Strategies
	// Exec is passed to every owner's write (verify timeout, Lease holder, logging), in both
	// forms.
	Exec ownerupdate.ExecuteRequest
	// Clock times the engine's bake (nil: the system clock).
	Clock engine.Clock
}

// ApplyResult is what an apply did. For the single-owner form it holds Revision, Owner (the plan
// made at apply) and Execution, nothing else.
type ApplyResult struct {
	Revision string
	Plan     engine.Plan
	Result   engine.Result
	// Live is the preview taken when apply started (for the summary).
	Live *owners.FleetPlan
	// Status is every machine's status (owners' Status constants) by machine name.
	Status map[string]string
	// Differences say where apply departed from the plan (clusters left out, joined since).
	Differences []string
	// Stopped says why a wave was not started because its preview changed ("" if none was).
	Stopped string
	// Owner is the single-owner form's plan made at apply, nil for the fleet form.
	Owner *OwnerPlan
	// Execution is what the single-owner form's write did (nil when nothing was executed: a stale
	// plan).
	Execution *ownerupdate.Execution
}

// Err is the apply's failure: the engine's, or a wave stopped for a changed preview.
func (r *ApplyResult) Err() error {
	var errs []error
	if err := r.Result.Err(); err != nil {
		errs = append(errs, err)
	}
	if r.Stopped != "" {
		errs = append(errs, errors.New(r.Stopped))
	}
	return errors.Join(errs...)
}

// Apply carries out spec: the planned waves exactly (engine.Plan.Follow), each cluster's
// owners written one after the other and verified, at most update_limit clusters at a time, no
// new wave once more than max_failures clusters failed, nothing rolled back. Before each wave
// the preview of its clusters is taken again and compared with the plan's; a difference stops
// the run before that wave writes anything. A refusal (blocked machines, canaries not first)
// is returned as an error with nothing written. The single-owner form (Spec.Owner) is planned
// again and carried out unless stale (see applyOwner).
func (s *Service) Apply(ctx context.Context, req ApplyRequest) (*ApplyResult, error) {
	if req.Spec.Owner != nil {
		return s.applyOwner(ctx, req)
	}
	spec := req.Spec
	found, err := s.Fleet.Discover(ctx, spec.Query)
	if err != nil {
		return nil, err
	}
	live, targets, err := s.planFleet(ctx, spec, found)
	if err != nil {
		return nil, err
	}
	out := &ApplyResult{Revision: spec.Revision(), Live: live}
	plan := engine.PlanRollout(targets, out.Revision, spec.Policy)
	if req.Planned != nil {
		plan = plan.Follow(req.Planned, spec.Policy)
		out.Differences = plan.Differences
	}
	for _, n := range found.Missing {
		out.Differences = append(out.Differences, fmt.Sprintf("planned %s: no such Cluster any more; left out", n))
	}
	out.Plan = plan
	if err := canaryRefusal(plan, spec.Policy); err != nil {
		return nil, err
	}
	baseline := req.Strategies
	if baseline == nil {
		baseline = strategiesOf(live)
	}
	changing := waveClusters(plan)
	blocked := blockedIn(live, changing)
	if diffs := baseline.Differences(strategiesOf(live), changing); len(diffs) > 0 || blocked != nil {
		return nil, usererr.New("In-Place Preview Changed Since The Plan", "Nothing was written: "+previewChange(diffs, blocked))
	}
	w := &world{svc: s, spec: spec, exec: req.Exec, baseline: baseline, ctx: ctx, current: map[string]*owners.ClusterPlan{}, status: map[string]string{}}
	for _, c := range live.Clusters {
		w.current[c.Cluster] = c
	}
	w.waveOf = map[string]int{}
	for i, wave := range plan.Waves {
		for _, n := range wave {
			w.waveOf[n] = i
		}
	}
	w.waves = plan.Waves
	clock := req.Clock
	if clock == nil {
		clock = engine.SystemClock{}
	}
	out.Result = engine.Execute(ctx, plan, w, clock, spec.Policy)
	out.Stopped = w.stopped
	out.Status = map[string]string{}
	for _, c := range live.Clusters {
		for _, m := range c.Machines() {
			out.Status[m.Machine] = owners.StatusNotStarted
			if plan.Intents[c.Cluster].Action == engine.ActionAlreadyCurrent {
				out.Status[m.Machine] = owners.StatusUnchanged
			}
		}
	}
	maps.Copy(out.Status, w.status)
	return out, nil
}

func waveClusters(p engine.Plan) []string {
	var out []string
	for _, w := range p.Waves {
		out = append(out, w...)
	}
	return out
}

// blockedIn is fp's blocked machines (FleetPlan.Err) in clusters only: a cluster apply does not
// touch cannot stop it.
func blockedIn(fp *owners.FleetPlan, clusters []string) error {
	sub := &owners.FleetPlan{Revision: fp.Revision}
	for _, c := range fp.Clusters {
		if slices.Contains(clusters, c.Cluster) {
			sub.Clusters = append(sub.Clusters, c)
		}
	}
	return sub.Err()
}

func previewChange(diffs []string, blocked error) string {
	lines := slices.Clone(diffs)
	if blocked != nil {
		lines = append(lines, strings.Split(blocked.Error(), "\n")...)
	}
	return "the extensions' preview differs from the plan's:\n  " + strings.Join(lines, "\n  ") +
		"\nPlan again to see what Cluster API would do now."
}

// world is the engine's World for one apply: a target is a cluster, carried out with the plan
// of its owners taken right before its wave (Held).
type world struct {
	svc      *Service
	spec     Spec
	exec     ownerupdate.ExecuteRequest
	baseline Strategies
	// ctx is the apply's context, for the previews taken in Held (the engine's Holder has none).
	ctx    context.Context
	waves  [][]string
	waveOf map[string]int

	// Written by Held on the engine's driving goroutine between waves, read by the wave's
	// goroutines after they start; mu guards it against the bake's Verify of the previous wave.
	mu      sync.Mutex
	current map[string]*owners.ClusterPlan
	checked map[int]bool
	held    map[string]string
	stopped string
	status  map[string]string
}

var (
	_ engine.World  = (*world)(nil)
	_ engine.Holder = (*world)(nil)
)

// Held takes the preview of target's wave again when the engine starts that wave (once per
// wave): a cluster gone since is held back; a wave whose preview is worse than the plan's
// holds back every cluster of it and of the waves after it, and says why (Stopped).
func (w *world) Held(target string) string {
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	if stopped != "" {
		return stopped
	}
	k, ok := w.waveOf[target]
	if !ok {
		return ""
	}
	if !w.checked[k] {
		w.checkWave(k)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped != "" {
		return w.stopped
	}
	return w.held[target]
}

// checkWave previews wave k's clusters again, one by one (so that one gone is only that one).
func (w *world) checkWave(k int) {
	fresh := map[string]*owners.ClusterPlan{}
	held := map[string]string{}
	var problems []string
	var blocked []error
	for _, name := range w.waves[k] {
		fp, err := w.svc.Planner.PlanFleet(w.ctx, w.spec.request([]string{name}))
		switch {
		case err != nil && apierrors.IsNotFound(err):
			held[name] = "gone: " + err.Error()
			continue
		case err != nil:
			problems = append(problems, fmt.Sprintf("cluster %s: preview failed: %v", name, err))
			continue
		}
		if err := fp.Err(); err != nil {
			blocked = append(blocked, err)
		}
		problems = append(problems, w.baseline.Differences(strategiesOf(fp), []string{name})...)
		if cp := fp.Cluster(name); cp != nil {
			if cp.SkipReason != "" {
				held[name] = cp.SkipReason
				continue
			}
			fresh[name] = cp
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checked == nil {
		w.checked, w.held = map[int]bool{}, map[string]string{}
	}
	w.checked[k] = true
	if len(problems) > 0 || len(blocked) > 0 {
		w.stopped = fmt.Sprintf("wave %d not started: %s", k+1, previewChange(problems, errors.Join(blocked...)))
		return
	}
	maps.Copy(w.held, held)
	maps.Copy(w.current, fresh)
}

func (w *world) plan(cluster string) (*owners.ClusterPlan, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cp := w.current[cluster]
	if cp == nil {
		return nil, engine.Mark(engine.ErrChangeRefused, fmt.Errorf("cluster %s is not in the plan", cluster))
	}
	return cp, nil
}

func (w *world) note(st map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	maps.Copy(w.status, st)
}

// Apply writes the change to the cluster's owners in order, waiting for each.
func (w *world) Apply(ctx context.Context, cluster, _ string) error {
	cp, err := w.plan(cluster)
	if err != nil {
		return err
	}
	st, err := w.svc.Updater.ApplyCluster(ctx, cp, w.exec)
	w.note(st)
	return gone(err)
}

// Verify waits until every owner of the cluster and its machines are up to date again.
func (w *world) Verify(ctx context.Context, cluster, _ string) error {
	cp, err := w.plan(cluster)
	if err != nil {
		return err
	}
	st, err := w.svc.Updater.VerifyCluster(ctx, cp, w.exec)
	w.note(st)
	return gone(err)
}

// Restore is never called for an irreversible change (engine.Policy.Irreversible).
func (w *world) Restore(context.Context, string, string) error {
	return errors.New("in-place updates are not restored (engine.Policy.Irreversible)")
}

// Record keeps nothing: the owners' annotations are the record.
func (w *world) Record(context.Context, engine.Event) error { return nil }

// gone marks an owner or Cluster that no longer exists: the cluster was deleted under the run.
func gone(err error) error {
	if err != nil && apierrors.IsNotFound(err) && !errors.Is(err, engine.ErrRevisionFailed) {
		return engine.Mark(engine.ErrTargetGone, err)
	}
	return err
}
