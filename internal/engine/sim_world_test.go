package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// epoch is where the simulations' fake clocks start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The simulated world: targets with real (simulated) revisions on them, a
// records store that follows the Event contract, injected faults, and
// latencies drawn from a seeded source and slept on the FakeClock. It checks
// the engine's invariants at every call, every record and every step of the
// clock, and keeps a log that is deterministic for a given scenario.

const desiredRev = "r2"

// faults are what goes wrong on one simulated target.
type faults struct {
	applyFails   bool // apply is rejected
	verifyFails  bool // the desired revision never becomes ready
	verifyHangs  bool // verification of the desired revision outlasts the verify timeout
	decays       bool // ready at first, broken by the time the bake is over
	restoreFails bool // restoring errors out
	restoreHangs bool // restoring outlasts the rollback timeout
	goneAt       int  // the target vanishes on its n-th Apply/Verify/Restore (0 = never)
	unreachable  bool // verification of the desired revision meets an infrastructure failure
}

type simSpec struct {
	name   string
	skip   string
	rec    TargetRecord
	actual string // what really runs on the target; defaults to rec.Current
	faults faults
}

type scenario struct {
	name        string
	seed        uint64
	targets     []simSpec
	policy      Policy
	cancelAt    time.Duration // cancel the run's context this long after it starts (0 = never)
	cancelStep  int           // or half a millisecond after this step of the clock (0 = never)
	recordFailP float64       // chance that a target record fails to be written
}

type simTarget struct {
	simSpec
	rng    *rand.Rand
	intent Intent
	actual string
	rec    TargetRecord
	calls  int // Apply/Verify/Restore calls
	gone   bool
	// restoring is set from a Restore until the next Apply, to tell a
	// verification of a restore from a verification of the rollout.
	restoring    bool
	verifies     int       // successful verifications of the desired revision
	lastVerifyOK time.Time // when the last one ended
	verifyFailed bool      // a verification of the desired revision failed, not by cancellation
	invalidTried bool      // Record(EventInvalid) was called for the desired revision
}

// latency draws a whole number of milliseconds in [lo, hi]; cancellation
// happens at half milliseconds, so the two never tie.
func (tg *simTarget) latency(lo, hi int) time.Duration {
	return time.Duration(lo+tg.rng.IntN(hi-lo+1)) * time.Millisecond
}

type logEntry struct {
	at      time.Time
	target  string
	barrier bool // written by the engine's driving goroutine while no target is in flight
	text    string
}

type waveTrack struct {
	k           int
	members     []string
	done        bool
	succeeded   bool
	lastSuccess time.Time
}

type simWorld struct {
	t     testing.TB
	clock *FakeClock
	sc    scenario
	plan  Plan
	start time.Time

	mu        sync.Mutex
	targets   map[string]*simTarget
	log       []logEntry
	active    map[string]int // targets with an Apply/Verify/Restore in progress
	batch     *Event         // the open batch, if any
	members   map[string]bool
	lastWave  *waveTrack
	cancelled bool
	failures  int // EventFailed records attempted
	// stageFailures counts failures per stage (Intent.Stage), as failures does for the run.
	stageFailures map[int]int
	finished      bool
}

// overBudget says whether the run's or a stage's failures exceed its max_failures.
func (w *simWorld) overBudget() bool {
	if w.failures > w.plan.MaxFailures {
		return true
	}
	for i, st := range w.plan.Stages {
		if w.stageFailures[i+1] > st.MaxFailures {
			return true
		}
	}
	return false
}

// inFlightLimit is the most targets a run may change at once: update_limit, or a stage's.
func (w *simWorld) inFlightLimit() int {
	n := w.plan.UpdateLimit
	for _, st := range w.plan.Stages {
		n = max(n, st.UpdateLimit)
	}
	return n
}

// waveLimit and waveBake are the update limit and bake time of a wave holding members: its
// stage's, or the run's.
func (w *simWorld) waveLimit(members []string) int {
	if st := w.stageOf(members); st != nil {
		return st.UpdateLimit
	}
	return w.plan.UpdateLimit
}

func (w *simWorld) waveBake(members []string) time.Duration {
	if st := w.stageOf(members); st != nil {
		return st.BakeTime
	}
	return w.sc.policy.BakeTime
}

func (w *simWorld) stageOf(members []string) *PlanStage {
	if len(members) == 0 {
		return nil
	}
	if i := w.plan.Intents[members[0]].Stage; i > 0 {
		return &w.plan.Stages[i-1]
	}
	return nil
}

func newSimWorld(t testing.TB, clock *FakeClock, sc scenario) *simWorld {
	w := &simWorld{t: t, clock: clock, sc: sc, start: clock.Now(), targets: map[string]*simTarget{}, active: map[string]int{}, stageFailures: map[int]int{}}
	for i, s := range sc.targets {
		tg := &simTarget{simSpec: s, rng: rand.New(rand.NewPCG(sc.seed, uint64(i)+1)), actual: s.actual, rec: s.rec}
		if tg.actual == "" {
			tg.actual = s.rec.Current
		}
		tg.rec.Invalid = maps.Clone(s.rec.Invalid)
		if tg.rec.Invalid == nil {
			tg.rec.Invalid = map[string]string{}
		}
		w.targets[s.name] = tg
	}
	return w
}

func (w *simWorld) engineTargets() []Target {
	out := make([]Target, 0, len(w.sc.targets))
	for _, s := range w.sc.targets {
		out = append(out, Target{Name: s.name, SkipReason: s.skip, Record: s.rec})
	}
	return out
}

func (w *simWorld) setPlan(p Plan) {
	w.plan = p
	for name, tg := range w.targets {
		tg.intent = p.Intents[name]
	}
}

// logf adds a target's log line; callers hold no lock.
func (w *simWorld) logf(target, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logLocked(target, false, format, args...)
}

func (w *simWorld) logLocked(target string, barrier bool, format string, args ...any) {
	w.log = append(w.log, logEntry{at: w.clock.Now(), target: target, barrier: barrier, text: fmt.Sprintf(format, args...)})
}

func (w *simWorld) errorf(format string, args ...any) {
	w.t.Helper()
	w.t.Errorf("%s (seed %d) at +%s: %s", w.sc.name, w.sc.seed, w.clock.Now().Sub(w.start), fmt.Sprintf(format, args...))
}

// enter starts an Apply/Verify/Restore call, checking that the target is
// one of the open batch and that no more than update_limit targets are in
// flight.
func (w *simWorld) enter(ctx context.Context, name, op string) (*simTarget, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tg := w.targets[name]
	if tg == nil {
		w.errorf("%s on unknown target %s", op, name)
		return nil, errors.New("unknown target")
	}
	if w.finished {
		w.errorf("%s %s after Execute returned", op, name)
	}
	w.checkMember(name, op)
	if w.active[name]++; w.active[name] > 1 {
		w.errorf("%s %s while another call on it is in progress", op, name)
	}
	if n := len(w.active); n > w.inFlightLimit() {
		w.errorf("%d targets in flight, update_limit %d", n, w.inFlightLimit())
	}
	if ctx.Err() != nil && op == "restore" {
		w.errorf("restore of %s on a done context: restores must run on a fresh one", name)
	}
	tg.calls++
	if tg.faults.goneAt > 0 && tg.calls >= tg.faults.goneAt {
		tg.gone = true
	}
	if tg.gone {
		return tg, fmt.Errorf("cluster %s: %w", name, ErrTargetGone)
	}
	return tg, nil
}

func (w *simWorld) exit(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.active[name]--; w.active[name] <= 0 {
		delete(w.active, name)
	}
}

func (w *simWorld) checkMember(name, op string) {
	if w.batch == nil || !w.members[name] {
		w.errorf("%s %s outside a batch holding it", op, name)
	}
}

func (w *simWorld) Apply(ctx context.Context, name, rev string) error {
	tg, err := w.enter(ctx, name, "apply")
	defer w.exit(name)
	if err != nil {
		w.logf(name, "apply %s: %v", rev, err)
		return err
	}
	w.mu.Lock()
	tg.restoring = false
	if tg.rec.Provisioning != rev {
		w.errorf("apply %s to %s while its record shows provisioning %q", rev, name, tg.rec.Provisioning)
	}
	d := tg.latency(5, 60)
	w.mu.Unlock()
	if err := w.clock.Sleep(ctx, d); err != nil {
		w.setActual(tg, "partial "+rev)
		w.logf(name, "apply %s: interrupted: %v", rev, err)
		return err
	}
	if tg.faults.applyFails {
		w.mu.Lock()
		tg.verifyFailed = true // a rejected apply is the revision's failure too
		w.mu.Unlock()
		w.setActual(tg, "partial "+rev)
		w.logf(name, "apply %s: rejected", rev)
		return Mark(ErrRevisionFailed, errors.New(`admission webhook "policy.example.com" denied the request`))
	}
	w.setActual(tg, rev)
	w.logf(name, "apply %s: ok", rev)
	return nil
}

func (w *simWorld) Verify(ctx context.Context, name, rev string) error {
	tg, err := w.enter(ctx, name, "verify")
	defer w.exit(name)
	if err != nil {
		w.logf(name, "verify %s: %v", show(rev), err)
		return err
	}
	w.mu.Lock()
	ofRollout := rev == desiredRev && !tg.restoring
	d := tg.latency(20, 400)
	if (ofRollout && tg.faults.verifyHangs) || (!ofRollout && tg.faults.restoreHangs) {
		d = 24 * time.Hour
	}
	if deadline, ok := ctx.Deadline(); !ok || deadline.After(w.clock.Now().Add(w.sc.policy.withDefaults().VerifyTimeout)) {
		w.errorf("verify %s of %s without the verify timeout (deadline %s, %v)", rev, name, deadline, ok)
	}
	w.mu.Unlock()
	if err := w.clock.Sleep(ctx, d); err != nil {
		timedOut := errors.Is(context.Cause(ctx), context.DeadlineExceeded)
		w.mu.Lock()
		if timedOut && ofRollout {
			tg.verifyFailed = true
		}
		w.mu.Unlock()
		w.logf(name, "verify %s: interrupted: %v", show(rev), err)
		if timedOut {
			// Not ready within the verify timeout: the revision's fault, as delivery marks it.
			return Mark(ErrRevisionFailed, err)
		}
		return err
	}
	if ofRollout && tg.faults.unreachable {
		w.logf(name, "verify %s: unreachable", show(rev))
		return errors.New("dial tcp 10.0.0.1:6443: connect: connection refused") // unmarked: infrastructure
	}
	w.mu.Lock()
	var failure string
	switch {
	case tg.actual != rev:
		failure = fmt.Sprintf("objects of %s missing (target runs %s)", show(rev), show(tg.actual))
	case ofRollout && tg.faults.verifyFails:
		failure = "Deployment web: 0/3 replicas available"
	case ofRollout && tg.faults.decays && tg.verifies > 0:
		failure = "Deployment web: CrashLoopBackOff"
	}
	if ofRollout {
		if failure != "" {
			tg.verifyFailed = true
		} else {
			tg.verifies++
			tg.lastVerifyOK = w.clock.Now()
		}
	}
	w.mu.Unlock()
	if failure != "" {
		w.logf(name, "verify %s: %s", show(rev), failure)
		return Mark(ErrRevisionFailed, errors.New(failure))
	}
	w.logf(name, "verify %s: ready", show(rev))
	return nil
}

func (w *simWorld) Restore(ctx context.Context, name, to string) error {
	tg, err := w.enter(ctx, name, "restore")
	defer w.exit(name)
	if err != nil {
		w.logf(name, "restore %s: %v", show(to), err)
		return err
	}
	w.mu.Lock()
	tg.restoring = true
	if tg.rec.Provisioning == "" || tg.rec.Backup != to {
		w.errorf("restore %s to %s while its record shows provisioning %q, backup %q", name, show(to), tg.rec.Provisioning, tg.rec.Backup)
	}
	if to != tg.intent.RestoreTo {
		w.errorf("restore %s to %s, but its restore point is %s", name, show(to), show(tg.intent.RestoreTo))
	}
	d := tg.latency(5, 60)
	if tg.faults.restoreHangs {
		d = 24 * time.Hour
	}
	w.mu.Unlock()
	if err := w.clock.Sleep(ctx, d); err != nil {
		w.setActual(tg, "partial restore")
		w.logf(name, "restore %s: interrupted: %v", show(to), err)
		return err
	}
	if tg.faults.restoreFails {
		w.setActual(tg, "partial restore")
		w.logf(name, "restore %s: failed", show(to))
		return Mark(ErrRevisionFailed, errors.New(`Deployment web: field is immutable`))
	}
	w.setActual(tg, to)
	w.logf(name, "restore %s: ok", show(to))
	return nil
}

func (w *simWorld) setActual(tg *simTarget, rev string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tg.actual = rev
}

func (w *simWorld) Record(ctx context.Context, ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ctx.Err() != nil {
		w.errorf("record %s %s on a done context: records after cancellation need a fresh one", ev.Kind, ev.Target)
	}
	if !ev.At.Equal(w.clock.Now()) {
		w.errorf("record %s %s stamped %s", ev.Kind, ev.Target, ev.At)
	}
	if ev.Target == "" {
		w.recordRun(ev)
		return nil
	}
	tg := w.targets[ev.Target]
	w.checkMember(ev.Target, "record "+string(ev.Kind))
	desc := describe(ev)

	// Bookkeeping of attempts, whether or not the write then fails.
	switch ev.Kind {
	case EventFailed:
		w.failures++
		if st := w.plan.Intents[ev.Target].Stage; st > 0 {
			w.stageFailures[st]++
		}
	case EventInvalid:
		if ev.Revision != desiredRev {
			w.errorf("%s recorded invalid on %s, not the desired %s", ev.Revision, ev.Target, desiredRev)
		}
		if !tg.verifyFailed {
			w.errorf("%s recorded invalid on %s without a failed verification", ev.Revision, ev.Target)
		}
		tg.invalidTried = true
	case EventSucceeded:
		if w.lastWave != nil && w.batch.Phase == PhaseWave {
			w.lastWave.succeeded, w.lastWave.lastSuccess = true, w.clock.Now()
		}
	case EventProvisioning:
		if w.cancelled {
			w.errorf("%s provisioned after cancellation", ev.Target)
		}
	}
	if w.sc.recordFailP > 0 && ev.Kind != EventGone && tg.rng.Float64() < w.sc.recordFailP {
		w.logLocked(ev.Target, false, "record %s: failed", desc)
		return errors.New("etcdserver: request timed out")
	}

	switch ev.Kind {
	case EventProvisioning:
		if ev.Revision != desiredRev || ev.Backup != tg.intent.RestoreTo {
			w.errorf("%s provisioning %s with backup %s; restore point is %s", ev.Target, ev.Revision, show(ev.Backup), show(tg.intent.RestoreTo))
		}
		tg.rec.Provisioning, tg.rec.Backup = ev.Revision, ev.Backup
	case EventSucceeded:
		if tg.actual != ev.Revision {
			w.errorf("%s recorded succeeded on %s but runs %s", ev.Target, ev.Revision, show(tg.actual))
		}
		tg.rec.Current, tg.rec.Backup, tg.rec.Provisioning = ev.Revision, ev.Backup, ""
	case EventRollingBack:
		tg.rec.Provisioning, tg.rec.Backup = ev.Revision, ev.Backup
	case EventRestored:
		if tg.actual != ev.Revision {
			w.errorf("%s recorded restored to %s but runs %s", ev.Target, show(ev.Revision), show(tg.actual))
		}
		tg.rec.Current, tg.rec.Backup, tg.rec.Provisioning = ev.Revision, ev.Revision, ""
	case EventInvalid:
		tg.rec.Invalid[ev.Revision] = ev.Reason
	}
	w.logLocked(ev.Target, false, "record %s", desc)
	return nil
}

func describe(ev Event) string {
	switch ev.Kind {
	case EventProvisioning, EventSucceeded, EventRollingBack:
		return fmt.Sprintf("%s %s (backup %s)", ev.Kind, ev.Revision, show(ev.Backup))
	case EventRestored:
		return fmt.Sprintf("%s %s", ev.Kind, show(ev.Revision))
	case EventFailed, EventInvalid, EventRestoreFailed:
		return fmt.Sprintf("%s %s: %s", ev.Kind, show(ev.Revision), ev.Reason)
	default:
		return fmt.Sprintf("%s: %s", ev.Kind, ev.Reason)
	}
}

// recordRun checks run and batch events: one batch at a time, none larger
// than update_limit, none after cancellation; a wave only within the
// failure budget and after the previous one was verified and baked; a
// rollback only once the budget ran out under on_failure = rollback.
func (w *simWorld) recordRun(ev Event) {
	switch ev.Kind {
	case EventBatchStarted:
		if w.batch != nil {
			w.errorf("%s %d started while %s %d is open", ev.Phase, ev.Batch, w.batch.Phase, w.batch.Batch)
		}
		limit := w.plan.UpdateLimit
		if ev.Phase == PhaseWave {
			limit = w.waveLimit(ev.Targets)
		}
		if len(ev.Targets) == 0 || len(ev.Targets) > limit {
			w.errorf("%s %d holds %d targets, update_limit %d", ev.Phase, ev.Batch, len(ev.Targets), limit)
		}
		if w.cancelled {
			w.errorf("%s %d started after cancellation", ev.Phase, ev.Batch)
		}
		switch ev.Phase {
		case PhaseResume:
			if w.lastWave != nil {
				w.errorf("resume after a wave")
			}
		case PhaseWave:
			if w.overBudget() {
				w.errorf("wave %d started after %d failures, max_failures %d (stages: %v)", ev.Batch, w.failures, w.plan.MaxFailures, w.stageFailures)
			}
			if lw := w.lastWave; lw != nil {
				if !lw.done || lw.k >= ev.Batch {
					w.errorf("wave %d started before wave %d was done", ev.Batch, lw.k)
				}
				if bake := w.waveBake(lw.members); lw.succeeded && bake > 0 {
					if since := w.clock.Now().Sub(lw.lastSuccess); since < bake {
						w.errorf("wave %d started %s after wave %d's last success; bake time %s", ev.Batch, since, lw.k, bake)
					}
					for _, m := range lw.members {
						tg := w.targets[m]
						if tg.actual == desiredRev && !tg.gone && tg.lastVerifyOK.Before(lw.lastSuccess.Add(bake)) {
							w.errorf("wave %d started but %s of wave %d was not verified after the bake", ev.Batch, m, lw.k)
						}
					}
				}
			}
			w.lastWave = &waveTrack{k: ev.Batch, members: ev.Targets}
		case PhaseRollback:
			if !w.overBudget() || w.sc.policy.OnFailure == Halt {
				w.errorf("rollback with %d failures, max_failures %d, on_failure %q", w.failures, w.plan.MaxFailures, w.sc.policy.OnFailure)
			}
		}
		w.batch = &ev
		w.members = map[string]bool{}
		for _, m := range ev.Targets {
			w.members[m] = true
		}
		w.logLocked("", true, "%s %d/%d started: %s", ev.Phase, ev.Batch, ev.Batches, strings.Join(ev.Targets, ", "))
	case EventBatchDone:
		if w.batch == nil || w.batch.Phase != ev.Phase || w.batch.Batch != ev.Batch {
			w.errorf("%s %d done but not open", ev.Phase, ev.Batch)
		}
		for m := range w.members {
			if w.active[m] > 0 {
				w.errorf("%s %d done while %s is in flight", ev.Phase, ev.Batch, m)
			}
		}
		if ev.Phase == PhaseWave && w.lastWave != nil {
			w.lastWave.done = true
		}
		w.batch, w.members = nil, nil
		msg := fmt.Sprintf("%s %d/%d done", ev.Phase, ev.Batch, ev.Batches)
		if ev.Reason != "" {
			msg += ": " + ev.Reason
		}
		w.logLocked("", true, "%s", msg)
	default:
		w.logLocked("", true, "%s %s: %s", ev.Kind, ev.Revision, ev.Reason)
	}
}

// cancelNow is the scenario's cancellation, fired by the FakeClock.
func (w *simWorld) cancelNow(cancel context.CancelFunc) {
	w.mu.Lock()
	w.cancelled = true
	w.logLocked("", false, "context cancelled")
	w.mu.Unlock()
	cancel()
}

// checkStep runs between steps of the clock, when every goroutine is
// blocked.
func (w *simWorld) checkStep() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.active); n > w.inFlightLimit() {
		w.errorf("%d targets in flight, update_limit %d", n, w.inFlightLimit())
	}
	if w.batch == nil && len(w.active) > 0 {
		w.errorf("targets in flight outside a batch")
	}
}

// checkResult runs once Execute returned: every target ends on the new
// revision or on its restore point with a record that says so, or with a
// record that shows it unsettled and an outcome that says the same.
func (w *simWorld) checkResult(res Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished = true
	if len(w.active) > 0 {
		w.errorf("Execute returned with calls in flight")
	}
	if res.Failures != w.failures {
		w.errorf("result counts %d failures, %d were recorded", res.Failures, w.failures)
	}
	lost := 0
	for _, o := range res.Outcomes {
		if o.Status == StatusLostContact {
			lost++
		}
	}
	if lost > res.LostContact {
		w.errorf("%d targets ended lost-contact, the result counts %d", lost, res.LostContact)
	}
	halted := strings.Contains(res.AbortReason, "could not be recorded invalid")
	if res.Aborted != (w.overBudget() || res.LostContact > w.plan.MaxUnsettled || halted) {
		w.errorf("aborted %v with %d failures, max_failures %d, %d lost contact, max_unsettled %d", res.Aborted, w.failures,
			w.plan.MaxFailures, res.LostContact, w.plan.MaxUnsettled)
	}
	if res.Cancelled && !w.cancelled {
		w.errorf("result says cancelled but the context never was")
	}
	for name, tg := range w.targets {
		o, ok := res.Outcome(name)
		if !ok {
			w.errorf("no outcome for %s", name)
			continue
		}
		in := tg.intent
		if tg.invalidTried != tg.verifyFailed {
			w.errorf("%s: verification failed %v, recorded invalid %v", name, tg.verifyFailed, tg.invalidTried)
		}
		if o.Invalid && tg.rec.Invalid[desiredRev] == "" {
			w.errorf("%s: outcome says invalid, records do not", name)
		}
		untouched := in.Action == ActionSkip || in.Action == ActionAlreadyCurrent || o.Status == StatusNotStarted
		if untouched {
			if tg.calls > 0 || tg.rec.Current != tg.simSpec.rec.Current || tg.rec.Provisioning != tg.simSpec.rec.Provisioning {
				w.errorf("%s (%s, %s) was touched: %d calls, record %+v", name, in.Action, o.Status, tg.calls, tg.rec)
			}
			continue
		}
		if tg.gone {
			if o.Status != StatusGone {
				w.errorf("%s vanished but ended %s", name, o.Status)
			}
			continue
		}
		if tg.rec.Provisioning == "" {
			if tg.actual != tg.rec.Current {
				w.errorf("%s runs %s but is recorded on %s", name, show(tg.actual), show(tg.rec.Current))
			}
			if tg.actual != desiredRev && tg.actual != in.RestoreTo {
				w.errorf("%s ended on %s, neither %s nor its restore point %s", name, show(tg.actual), desiredRev, show(in.RestoreTo))
			}
			if o.Unsettled || o.Revision != tg.actual {
				w.errorf("%s runs %s, settled, but its outcome says %+v", name, show(tg.actual), o)
			}
		} else {
			if !o.Unsettled || o.Provisioning != tg.rec.Provisioning {
				w.errorf("%s recorded provisioning %s but its outcome says %+v", name, tg.rec.Provisioning, o)
			}
			if tg.rec.Backup != in.RestoreTo {
				w.errorf("%s recorded with backup %s, restore point %s", name, show(tg.rec.Backup), show(in.RestoreTo))
			}
		}
		want := map[Status]string{StatusSucceeded: desiredRev, StatusFailed: in.RestoreTo, StatusCancelled: in.RestoreTo,
			StatusRolledBack: in.RestoreTo, StatusRestored: in.RestoreTo}
		if rev, ok := want[o.Status]; ok && tg.actual != rev {
			w.errorf("%s is %s but runs %s", name, o.Status, show(tg.actual))
		}
		if o.Status == StatusLostContact {
			if o.Invalid || o.Failed {
				w.errorf("%s lost contact but was recorded invalid or counted as failed: %+v", name, o)
			}
			if !o.Unsettled && tg.actual != in.RestoreTo {
				w.errorf("%s lost contact and is recorded restored, but runs %s, not %s", name, show(tg.actual), show(in.RestoreTo))
			}
		}
		if o.Status == StatusUnsettled && tg.rec.Provisioning == "" && !strings.HasPrefix(o.Error, "record provisioning: ") {
			// Only a target whose provisioning record could not be written (so nothing was
			// applied) may end unsettled with a settled record.
			w.errorf("%s unsettled but its record is settled", name)
		}
		if o.Status == StatusUnsettled && o.Failed && !strings.Contains(o.Error, "restore to") {
			w.errorf("%s unsettled by an infrastructure failure but counted against the budget", name)
		}
		if o.Status == StatusRolledBack && w.sc.policy.OnFailure == Halt {
			w.errorf("%s rolled back under on_failure halt", name)
		}
		if o.Status == StatusSucceeded && w.overBudget() && !res.Cancelled && w.sc.policy.withDefaults().OnFailure == Rollback &&
			!strings.Contains(o.Error, "record rolling back") {
			w.errorf("%s left on %s after the run aborted with on_failure rollback", name, desiredRev)
		}
	}
	if !res.Aborted && !res.Cancelled {
		for _, o := range res.Outcomes {
			if o.Status == StatusNotStarted {
				w.errorf("%s not started, yet the run was neither aborted nor cancelled", o.Target)
			}
		}
	}
}

// render is the log in a deterministic order. Entries between two barrier
// entries (written by the engine's driving goroutine while nothing is in
// flight) are sorted by time and then target; each target's own entries
// keep their order, so the order is that of the fake clock.
func (w *simWorld) render() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	var seg []logEntry
	flush := func() {
		slices.SortStableFunc(seg, func(x, y logEntry) int {
			if c := x.at.Compare(y.at); c != 0 {
				return c
			}
			return cmp.Compare(x.target, y.target)
		})
		for _, e := range seg {
			w.writeEntry(&b, e)
		}
		seg = seg[:0]
	}
	for _, e := range w.log {
		if e.barrier {
			flush()
			w.writeEntry(&b, e)
		} else {
			seg = append(seg, e)
		}
	}
	flush()
	return b.String()
}

func (w *simWorld) writeEntry(b *strings.Builder, e logEntry) {
	target := e.target
	if target == "" {
		target = "-"
	}
	fmt.Fprintf(b, "%10.4fs  %-4s %s\n", e.at.Sub(w.start).Seconds(), target, e.text)
}

// simulate plans and executes sc in a synctest bubble, stepping the
// FakeClock whenever every goroutine is blocked, and checks the
// invariants. It returns the plan, the result and the world.
func simulate(t *testing.T, sc scenario) (Plan, Result, *simWorld) {
	t.Helper()
	var (
		plan Plan
		res  Result
		w    *simWorld
	)
	synctest.Test(t, func(t *testing.T) {
		clock := NewFakeClock(epoch)
		w = newSimWorld(t, clock, sc)
		plan = PlanRollout(w.engineTargets(), desiredRev, sc.policy)
		w.setPlan(plan)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if sc.cancelAt > 0 {
			clock.AfterFunc(sc.cancelAt, func() { w.cancelNow(cancel) })
		}
		done := make(chan Result, 1)
		go func() { done <- Execute(ctx, plan, w, clock, sc.policy) }()
		for step := 0; ; step++ {
			synctest.Wait()
			w.checkStep()
			select {
			case res = <-done:
				w.checkResult(res)
				return
			default:
			}
			if step > 0 && step == sc.cancelStep {
				// Half a millisecond on: latencies are whole milliseconds,
				// so the cancellation never ties with another event.
				clock.AfterFunc(500*time.Microsecond, func() { w.cancelNow(cancel) })
			}
			if step > 1_000_000 || !clock.AdvanceToNext() {
				// Nothing can wake the engine: it waits on something that
				// is not the clock. synctest reports the stuck goroutines.
				t.Fatalf("%s (seed %d): Execute is stuck after %d steps", sc.name, sc.seed, step)
			}
		}
	})
	return plan, res, w
}

// summary renders a plan and a result for golden files.
func summary(p Plan, r Result) string {
	var b strings.Builder
	b.WriteString("plan:\n")
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	b.WriteString("result:\n")
	for _, o := range r.Outcomes {
		fmt.Fprintf(&b, "  %-4s %-18s %-15s on %s", o.Target, o.Intent, o.Status, show(o.Revision))
		if o.Unsettled {
			fmt.Fprintf(&b, ", unsettled (provisioning %s)", o.Provisioning)
		}
		if o.Failed {
			b.WriteString(" [failed]")
		}
		if o.Invalid {
			b.WriteString(" [invalid]")
		}
		if o.Error != "" {
			fmt.Fprintf(&b, "\n       error: %s", o.Error)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  failures %d of max %d, waves done %d, aborted %v, rolled back %v, cancelled %v\n",
		r.Failures, r.MaxFailures, r.WavesDone, r.Aborted, r.RolledBack, r.Cancelled)
	if err := r.Err(); err != nil {
		fmt.Fprintf(&b, "err:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}
	for _, warn := range r.Warnings() {
		fmt.Fprintf(&b, "warning: %s\n", warn)
	}
	return b.String()
}
