package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Execute carries out plan against world and returns what happened.
//
// It first settles the targets an earlier run left unsettled (plan.Resume),
// then runs plan.Waves in order. The targets of a batch run concurrently, so
// at most plan.UpdateLimit targets are in flight; a wave is verified and
// baked (policy.BakeTime, then verified again) before the next starts.
// Errors are handled by class (see ErrRevisionFailed): a revision failure or
// a refused change counts against plan.MaxFailures and the target is
// restored to its backup, a revision failure also records the revision
// invalid there; an infrastructure failure leaves the target unsettled,
// uncounted, for the next run; a vanished target is set aside. Once
// failures exceed the budget no new wave starts and, with on_failure =
// rollback, every target this run moved to the revision is restored.
//
// When ctx is cancelled nothing new starts; targets in flight are restored
// to their backup on a fresh context bounded by policy.RollbackTimeout, so
// that each ends recorded on a known revision (or recorded unsettled, for
// the next run to resume). Execute returns once all work has stopped; it
// never returns while a World call it made is still running.
//
// plan must come from PlanRollout: its limits are the ones resolved there;
// policy supplies the timeouts, the bake time and on_failure.
func Execute(ctx context.Context, plan Plan, world World, clock Clock, policy Policy) Result {
	r := newRun(plan, world, clock, policy.withDefaults())
	r.execute(ctx)
	return r.res
}

// run is the state of one Execute. Each Outcome is written only by the
// goroutine working on its target, and read by the driving goroutine after
// the batch is joined; mu guards what batches share.
type run struct {
	plan   Plan
	world  World
	clock  Clock
	policy Policy
	limit  int
	res    Result

	mu       sync.Mutex
	failures int
	// stageFailures counts failures per stage (by Intent.Stage); a stage past its own
	// max_failures stops the run like the rollout's budget does.
	stageFailures map[int]int
	lostContact   int
	// haltReason, once set, stops every new wave: the run cannot go on safely (a revision
	// that failed could not be recorded invalid).
	haltReason string
	cancelled  atomic.Bool
}

func newRun(plan Plan, world World, clock Clock, policy Policy) *run {
	r := &run{plan: plan, world: world, clock: clock, policy: policy, limit: max(plan.UpdateLimit, 1), stageFailures: map[int]int{}}
	r.res = Result{
		Desired:      plan.Desired,
		MaxFailures:  plan.MaxFailures,
		MaxUnsettled: plan.MaxUnsettled,
		Outcomes:     make([]Outcome, len(plan.Order)),
		index:        make(map[string]int, len(plan.Order)),
	}
	for i, name := range plan.Order {
		in := plan.Intents[name]
		o := Outcome{Target: name, Intent: in.Action, Wave: in.Wave, Revision: in.Current, Backup: in.RestoreTo}
		switch in.Action {
		case ActionSkip:
			o.Status = StatusSkipped
		case ActionAlreadyCurrent:
			o.Status = StatusAlreadyCurrent
		default:
			o.Status = StatusNotStarted
		}
		if in.Provisioning != "" {
			o.Unsettled, o.Provisioning = true, in.Provisioning
		}
		r.res.Outcomes[i] = o
		r.res.index[name] = i
	}
	return r
}

func (r *run) execute(ctx context.Context) {
	r.res.Started = r.clock.Now()
	r.recordRun(ctx, Event{Kind: EventRunStarted, Revision: r.plan.Desired, Reason: fmt.Sprintf(
		"%d waves of up to %d targets, max_failures %d, on_failure %s",
		len(r.plan.Waves), r.limit, r.plan.MaxFailures, r.policy.OnFailure)})

	resume := chunk(r.plan.Resume, r.limit)
	for i, names := range resume {
		if r.stop(ctx) {
			break
		}
		r.batch(ctx, PhaseResume, i+1, len(resume), names, r.resumeTarget)
	}
	for i, wave := range r.plan.Waves {
		if r.stop(ctx) || r.overBudget() {
			break
		}
		r.wave(ctx, i+1, r.unheld(r.ready(wave)))
	}

	finish := "completed"
	if reason, rollback := r.abortReason(); reason != "" {
		r.res.Aborted = true
		r.res.AbortReason = reason
		finish = "aborted: " + r.res.AbortReason
		// Anything but an explicit halt rolls back: it is the safe reading
		// of a policy that skipped Validate.
		if rollback && r.policy.OnFailure != Halt {
			r.rollback(ctx)
		}
	}
	r.res.Failures, r.res.LostContact = r.failures, r.lostContact
	if r.cancelled.Load() {
		r.res.Cancelled = true
		r.res.CancelCause = context.Cause(ctx).Error()
		if r.res.Aborted {
			finish += "; cancelled: " + r.res.CancelCause
		} else {
			finish = "cancelled: " + r.res.CancelCause
		}
	}
	r.res.Finished = r.clock.Now()
	r.recordRun(ctx, Event{Kind: EventRunFinished, Revision: r.plan.Desired, Reason: finish})
}

// stop reports whether ctx is done, noting that cancellation cut the run.
func (r *run) stop(ctx context.Context) bool {
	if ctx.Err() != nil {
		r.cancelled.Store(true)
		return true
	}
	return false
}

// overBudget reports whether no new wave may start: failures exceeded max_failures, targets
// that lost contact exceeded max_unsettled, or the run was halted.
func (r *run) overBudget() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures > r.plan.MaxFailures || r.lostContact > r.plan.MaxUnsettled || r.haltReason != "" || r.stageOverBudget() != ""
}

// stageOverBudget names the first stage whose failures exceed its max_failures ("" if none).
// Called with mu held.
func (r *run) stageOverBudget() string {
	for i, st := range r.plan.Stages {
		if n := r.stageFailures[i+1]; n > st.MaxFailures {
			return fmt.Sprintf("stage %s: %s, more than its max_failures %d", st.Name, plural(n, "failure"), st.MaxFailures)
		}
	}
	return ""
}

// abortReason says why the run stopped early ("" if it did not), and whether on_failure
// applies: only failures of the revision roll the fleet back; a halt for lost contact or an
// unwritable ledger says nothing against the targets that succeeded.
func (r *run) abortReason() (reason string, rollback bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	if r.failures > r.plan.MaxFailures {
		parts = append(parts, fmt.Sprintf("%s, more than max_failures %d", plural(r.failures, "failure"), r.plan.MaxFailures))
		rollback = true
	}
	if stage := r.stageOverBudget(); stage != "" {
		parts = append(parts, stage+"; later stages do not start")
		rollback = true
	}
	if r.lostContact > r.plan.MaxUnsettled {
		parts = append(parts, fmt.Sprintf("%s stopped answering after the change began, more than max_unsettled %d",
			plural(r.lostContact, "target"), r.plan.MaxUnsettled))
	}
	if r.haltReason != "" {
		parts = append(parts, r.haltReason)
	}
	return strings.Join(parts, "; "), rollback
}

// halt stops every new wave, saying why (the first reason is kept).
func (r *run) halt(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.haltReason == "" {
		r.haltReason = reason
	}
}

func (r *run) countLostContact() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lostContact++
}

func (r *run) countFailure(o *Outcome) {
	r.mu.Lock()
	r.failures++
	if st := r.plan.Intents[o.Target].Stage; st > 0 {
		r.stageFailures[st]++
	}
	r.mu.Unlock()
	o.Failed = true
}

// ready drops from a wave the targets whose resume failed: they are
// unsettled (or gone) and must not be changed further in this run.
func (r *run) ready(wave []string) []string {
	var out []string
	for i, name := range wave {
		o := r.outcome(name)
		if o.Intent != ActionRestore || o.Status == StatusRestored {
			if out != nil {
				out = append(out, name)
			}
			continue
		}
		if out == nil {
			out = append(make([]string, 0, len(wave)), wave[:i]...)
		}
	}
	if out == nil {
		return wave
	}
	return out
}

// unheld drops from a wave the targets the World holds back now (Holder), marking them
// skipped with the reason: they are not touched, and the next run picks them up.
func (r *run) unheld(wave []string) []string {
	h, ok := r.world.(Holder)
	if !ok {
		return wave
	}
	out := make([]string, 0, len(wave))
	for _, name := range wave {
		if reason := h.Held(name); reason != "" {
			o := r.outcome(name)
			o.Status, o.Error = StatusSkipped, "held back when its wave started: "+reason
			continue
		}
		out = append(out, name)
	}
	return out
}

func (r *run) outcome(name string) *Outcome { return &r.res.Outcomes[r.res.index[name]] }

// batch runs fn for names concurrently, bracketed by batch events.
func (r *run) batch(ctx context.Context, phase Phase, k, of int, names []string, fn func(context.Context, *Outcome)) {
	r.recordRun(ctx, Event{Kind: EventBatchStarted, Phase: phase, Batch: k, Batches: of, Targets: names})
	r.each(ctx, names, fn)
	r.recordRun(ctx, Event{Kind: EventBatchDone, Phase: phase, Batch: k, Batches: of})
}

func (r *run) each(ctx context.Context, names []string, fn func(context.Context, *Outcome)) {
	var wg sync.WaitGroup
	for _, name := range names {
		o := r.outcome(name)
		wg.Go(func() { fn(ctx, o) })
	}
	wg.Wait()
}

// wave applies the desired revision to names, then bakes: waits BakeTime
// and verifies the wave again, so a revision that turns bad after becoming
// ready is caught before it spreads.
func (r *run) wave(ctx context.Context, k int, names []string) {
	if len(names) == 0 {
		return
	}
	of := len(r.plan.Waves)
	r.recordRun(ctx, Event{Kind: EventBatchStarted, Phase: PhaseWave, Batch: k, Batches: of, Targets: names})
	r.each(ctx, names, r.applyTarget)

	done := ""
	var baking []string
	for _, name := range names {
		if r.outcome(name).Status == StatusSucceeded {
			baking = append(baking, name)
		}
	}
	switch {
	case ctx.Err() != nil:
		r.cancelled.Store(true)
		done = "cancelled"
	case r.overBudget():
		// No wave follows; baking would only delay the rollback.
		reason, _ := r.abortReason()
		done = "no further wave: " + reason
	case len(baking) > 0 && r.bakeTime(k) > 0:
		if err := r.clock.Sleep(ctx, r.bakeTime(k)); err != nil {
			r.cancelled.Store(true)
			done = "cancelled while baking"
			break
		}
		r.each(ctx, baking, r.reverifyTarget)
		if ctx.Err() != nil {
			r.cancelled.Store(true)
			done = "cancelled while verifying after bake"
		}
	}
	if done == "" {
		r.res.WavesDone++
	}
	r.recordRun(ctx, Event{Kind: EventBatchDone, Phase: PhaseWave, Batch: k, Batches: of, Reason: done})
}

// bakeTime is how long wave k (1-based) bakes: its stage's bake time, or the policy's.
func (r *run) bakeTime(k int) time.Duration {
	if wave := r.plan.Waves[k-1]; len(wave) > 0 {
		if st := r.plan.Intents[wave[0]].Stage; st > 0 && st <= len(r.plan.Stages) {
			return r.plan.Stages[st-1].BakeTime
		}
	}
	return r.policy.BakeTime
}

// rollback restores every target this run moved to the desired revision.
func (r *run) rollback(ctx context.Context) {
	var names []string
	for _, o := range r.res.Outcomes {
		if o.Status == StatusSucceeded {
			names = append(names, o.Target)
		}
	}
	batches := chunk(names, r.limit)
	for i, b := range batches {
		if r.stop(ctx) {
			return
		}
		r.batch(ctx, PhaseRollback, i+1, len(batches), b, r.rollbackTarget)
	}
	r.res.RolledBack = len(names) > 0
}
