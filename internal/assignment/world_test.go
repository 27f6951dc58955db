package assignment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// These tests run assignments (run.execute, as Run does once it holds the Lease) over the fake
// fleet of fake_test.go, with faults injected through the deliverer seam, and check after every
// run the invariants of internal/delivery/world_test.go and internal/engine/sim_world_test.go
// lifted to bindings: a binding says what the cluster runs (applied: the module's revision runs
// and is recorded there; failed: the cluster does not run the revision it failed, it is back on
// its backup or recorded in flight for the next apply), a module goes only where its
// dependencies are applied, every cluster a module may go to is delivered to or bound blocked
// exactly once, nothing outside the plan is touched, nothing is written once the Lease is lost,
// and the run fails exactly when a module did not complete or the run was cancelled. Each run
// is in a synctest bubble: the engine's timeouts and the settle bound cost nothing.

// seededAt stamps the bindings earlier applies left; runAt is the run's injected clock.
var (
	seededAt = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	runAt    = time.Date(2026, 3, 4, 5, 6, 7, 800_000_000, time.UTC)
)

// worldSpec is three modules in a chain: mon depends on app, app on crds.
func worldSpec(t testing.TB, mode Mode, policy engine.Policy) Spec {
	t.Helper()
	mods, err := Order([]Module{
		{Name: "mon", Revision: "mon-r2", DependsOn: []string{"app"}},
		{Name: "app", Revision: "app-r2", DependsOn: []string{"crds"}},
		{Name: "crds", Revision: "crds-r2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Key: records.Key{Kind: KeyKind, Namespace: "fleet", Name: "base"}, ClusterNamespace: "fleet",
		RecordNamespace: "gradual-system", Modules: mods, Mode: mode, Policy: policy}
}

func oldRev(module string) string { return module + "-r1" }

// worldPolicy is a policy with short timeouts (virtual time in any case).
func worldPolicy(updateLimit, maxFailures int, onFailure engine.OnFailure) engine.Policy {
	return engine.Policy{UpdateLimit: engine.UpdateLimitOf(updateLimit), MaxFailures: engine.MaxFailuresOf(maxFailures), OnFailure: onFailure,
		VerifyTimeout: 300 * time.Millisecond, RollbackTimeout: 300 * time.Millisecond}
}

// modSnap is a module's state on a cluster before the run.
type modSnap struct {
	actual  string
	current string
	prov    string
}

// assignRun is what one assignment run did and left.
type assignRun struct {
	req       RunRequest
	res       *RunResult
	err       error
	r         *run
	before    map[string][]records.ModuleBinding
	after     map[string][]records.ModuleBinding
	snap      map[string]map[string]modSnap
	cancelled bool
	fenced    bool
}

// plan works out the request apply gets from a plan of the fleet as it is now (as the resource
// does: plan, then apply with what the plan showed).
func (f *fakeFleet) plan() RunRequest {
	f.t.Helper()
	obs, err := observe(context.Background(), f, fleet.Query{Namespace: f.spec.ClusterNamespace}, f.spec, false)
	if err != nil {
		f.t.Fatal(err)
	}
	p := PlanAssignment(obs, f.spec, nil)
	return RunRequest{Spec: f.spec, Query: fleet.Query{Namespace: f.spec.ClusterNamespace}, Planned: p.Apply, PlannedKnown: true,
		Waves: Waves(p, f.spec), Leaving: p.Leaving}
}

// apply runs the assignment as Run does once it holds the Lease: on a context carrying the
// Lease's write fence, cancelled with records.ErrLeaseLost when the fake loses it. Then it
// checks the invariants.
func (f *fakeFleet) apply(req RunRequest) assignRun {
	f.t.Helper()
	if req.Spec.Key == (records.Key{}) {
		req.Spec, req.Query = f.spec, fleet.Query{Namespace: f.spec.ClusterNamespace}
	}
	req.Logf = func(msg string, _ map[string]any) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logf("assignment: %s", msg)
	}
	a := assignRun{req: req, before: f.bindings(), snap: map[string]map[string]modSnap{}}
	for name, c := range f.clusters {
		a.snap[name] = map[string]modSnap{}
		for m, st := range c.mods {
			a.snap[name][m] = modSnap{actual: st.actual, current: st.rec.Current, prov: st.rec.Provisioning}
		}
	}
	fence := func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fenced {
			return fmt.Errorf("the Lease may be another apply's: %w", records.ErrLeaseLost)
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(records.WithFence(context.Background(), fence))
	defer cancel(nil)
	f.cancel = cancel
	a.r = newRun(ctx, f, req, func() time.Time { return runAt }, settleTimeout)
	a.res, a.err = a.r.execute(ctx)
	a.r.stopSettling()
	a.err = delivery.LeaseLost(ctx, a.err, "Assignment "+f.spec.Key.Describe())
	a.cancelled, a.fenced = ctx.Err() != nil, f.fenced
	a.after = f.bindings()
	f.check(a)
	if f.t.Failed() {
		f.t.Logf("err: %v", a.err)
		f.t.Logf("log:\n  %s", strings.Join(f.log, "\n  "))
		for _, rc := range f.runs {
			for _, o := range rc.res.Outcomes {
				f.t.Logf("%s on %s: %s revision %q error %q", rc.module, o.Target, o.Status, o.Revision, o.Error)
			}
		}
	}
	return a
}

// delivered reports whether this run rolled module out to cluster, and the outcome there.
func (f *fakeFleet) delivered(module, cluster string) (engine.Outcome, bool) {
	for _, rc := range f.runs {
		if rc.module == module {
			if o, ok := rc.res.Outcome(cluster); ok {
				return o, true
			}
		}
	}
	return engine.Outcome{}, false
}

func (f *fakeFleet) destroyed(module, cluster string) bool {
	for _, d := range f.destroys {
		if d.module == module && slices.Contains(d.clusters, cluster) {
			return true
		}
	}
	return false
}

// check verifies the invariants on what the run left.
func (f *fakeFleet) check(a assignRun) {
	t := f.t
	t.Helper()
	bindingIn := func(bs map[string][]records.ModuleBinding, cluster, module string) (records.ModuleBinding, bool) {
		return (&Observation{Bindings: bs}).Binding(cluster, module)
	}
	var clusters []string
	for name := range f.clusters {
		clusters = append(clusters, name)
	}
	slices.Sort(clusters)
	runFailed := false
	for _, rc := range f.runs {
		runFailed = runFailed || rc.err != nil
	}

	for _, name := range clusters {
		c := f.clusters[name]
		for _, m := range f.spec.Modules {
			errorf := func(format string, args ...any) {
				t.Helper()
				t.Errorf("%s module %s (faults %v): %s", name, m.Name, c.faults[m.Name], fmt.Sprintf(format, args...))
			}
			prev, hadPrev := bindingIn(a.before, name, m.Name)
			b, ok := bindingIn(a.after, name, m.Name)
			o, delivered := f.delivered(m.Name, name)
			st := c.mods[m.Name]
			if st == nil {
				st = &modState{}
			}
			unchanged := ok == hadPrev && reflect.DeepEqual(b, prev)

			// What this run wrote follows from the outcome: applied for succeeded and already
			// current, failed with the outcome's error where the module did not complete, the
			// binding as it was where nothing happened. Nothing at all once the Lease is lost.
			if delivered && !a.fenced {
				switch o.Status {
				case engine.StatusSucceeded, engine.StatusAlreadyCurrent:
					if !ok || b.Result != records.BindingApplied || b.Revision != m.Revision {
						errorf("%s, but bound %+v", o.Status, b)
					}
				case engine.StatusNotStarted, engine.StatusGone, engine.StatusSkipped:
					if !unchanged {
						errorf("%s, but its binding changed from %+v to %+v", o.Status, prev, b)
					}
				default:
					if !ok || b.Result != records.BindingFailed || b.Revision != m.Revision || b.Reason != o.Error {
						errorf("%s (%s), but bound %+v", o.Status, o.Error, b)
					}
				}
			}
			if !delivered && !f.destroyed(m.Name, name) {
				// Nothing outside the run's targets changed on the cluster.
				if was := a.snap[name][m.Name]; was != (modSnap{actual: st.actual, current: st.rec.Current, prov: st.rec.Provisioning}) {
					errorf("not delivered, yet it changed from %+v to %+v", was, st)
				}
			}
			if !ok {
				if hadPrev && !f.letGoOf(a, name) {
					errorf("lost its binding %+v, yet the cluster was not let go of", prev)
				}
				continue
			}
			switch b.Result {
			case records.BindingApplied:
				// The binding says what runs: the cluster runs the bound revision, recorded settled.
				// Once the Lease is lost nothing more is written, so a binding may lag what the run
				// did there; a deleted cluster's records are gone with it.
				stale := unchanged && (a.fenced && delivered || c.deleted)
				if !stale && (st.actual != b.Revision || st.rec.Current != b.Revision || st.rec.Provisioning != "") {
					errorf("bound applied on %s, but runs %q, records %+v", b.Revision, st.actual, st.rec)
				}
				if !unchanged && (!delivered || b.AppliedAt != runAt.Truncate(time.Second)) {
					errorf("binding changed to %+v, not stamped by this run's delivery (delivered %v)", b, delivered)
				}
			case records.BindingFailed:
				// No cluster ends on a revision the run failed: it is back on its backup, or
				// recorded in flight for the next apply to settle.
				if st.rec.Provisioning == "" && (st.actual != st.rec.Current || st.actual == b.Revision) {
					errorf("bound failed on %s, but runs %q, records %+v", b.Revision, st.actual, st.rec)
				}
				if !unchanged && !delivered {
					errorf("bound failed by this run, which did not deliver it")
				}
			case records.BindingBlocked:
				if delivered {
					errorf("bound blocked, yet delivered (%s)", o.Status)
				}
				if dep, _ := blockedBy(bindingsOf(a.after[name]), m); dep == "" && !a.fenced {
					errorf("bound blocked (%s), yet every module it depends on is applied", b.Reason)
				}
			default:
				errorf("binding result %q", b.Result)
			}
		}
	}

	// Every cluster a module may go to is delivered to, or bound blocked, exactly once; none
	// other is delivered to.
	for _, m := range f.spec.Modules {
		for _, name := range a.r.candidates[m.Name] {
			n := 0
			if slices.Contains(a.res.Applied[m.Name], name) {
				n++
			}
			if b, ok := a.r.bound[name][m.Name]; ok && b.Result == records.BindingBlocked {
				n++
			}
			if n > 1 || n == 0 && !a.cancelled {
				t.Errorf("module %s on candidate %s: delivered or blocked %d times", m.Name, name, n)
			}
		}
		for _, name := range a.res.Applied[m.Name] {
			if !slices.Contains(a.r.candidates[m.Name], name) {
				t.Errorf("module %s delivered to %s, not among its candidates %v", m.Name, name, a.r.candidates[m.Name])
			}
		}
	}

	// The run fails exactly when a module did not complete or the run was cancelled.
	if (a.err != nil) != (runFailed || a.cancelled) {
		t.Errorf("run error %v; a module failed %v, cancelled %v", a.err, runFailed, a.cancelled)
	}
	if a.err != nil {
		want := "Module Assignment Failed"
		if a.fenced {
			want = "Lease Lost"
		}
		if ue, ok := usererr.As(a.err); !ok || ue.Summary != want {
			t.Errorf("run error %v, want %q", a.err, want)
		}
	}
	// The progress record says how it ended, unless the Lease was lost: then it is not written.
	p := f.progress()
	switch {
	case p == nil:
		t.Error("no progress record")
	case a.fenced && p.Phase != records.PhaseRunning:
		t.Errorf("progress %s written after the Lease was lost", p.Phase)
	case !a.fenced && (p.Phase == records.PhaseSucceeded) != (a.err == nil):
		t.Errorf("progress %s, run error %v", p.Phase, a.err)
	}
	if !reflect.DeepEqual(a.res.Bindings, onlyConfigured(a.after, f.spec)) {
		t.Errorf("result bindings %v, recorded %v", a.res.Bindings, a.after)
	}
}

// letGoOf reports whether the run may have dropped cluster's bindings: the plan listed it
// leaving and it still leaves, or its Cluster is gone.
func (f *fakeFleet) letGoOf(a assignRun, name string) bool {
	c := f.clusters[name]
	return !a.cancelled && (c.deleted || !c.picked && slices.Contains(a.req.Leaving, name) && !c.unreachable)
}

func bindingsOf(bs []records.ModuleBinding) map[string]records.ModuleBinding {
	out := map[string]records.ModuleBinding{}
	for _, b := range bs {
		out[b.Module] = b
	}
	return out
}

// A cluster's start: which revisions an earlier apply left.
type worldStart int

const (
	startNew     worldStart = iota // nothing yet
	startOld                       // every module on its older revision
	startCurrent                   // every module on the configured revision
	startPartial                   // crds current, app older, mon not yet
)

func (f *fakeFleet) start(name string, s worldStart) {
	for _, m := range f.spec.Modules {
		switch {
		case s == startOld, s == startPartial && m.Name == "app":
			f.seed(name, m.Name, oldRev(m.Name))
		case s == startCurrent, s == startPartial && m.Name == "crds":
			f.seed(name, m.Name, m.Revision)
		}
	}
}

// TestWorldRandomFaults runs assignments over fleets with random starting states, faults,
// modes, policies and fleet changes between plan and apply, checking the invariants after each.
func TestWorldRandomFaults(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 30
	}
	modules := []string{"crds", "app", "mon"}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0xa55))
				onFailure := engine.Rollback
				if rng.IntN(3) == 0 {
					onFailure = engine.Halt
				}
				policy := worldPolicy(1+rng.IntN(3), rng.IntN(3), onFailure)
				policy.MaxUnsettled = engine.MaxFailuresOf(rng.IntN(2))
				mode := ApplyOnce
				if rng.IntN(2) == 0 {
					mode = Reconcile
				}
				f := newFakeFleet(t, worldSpec(t, mode, policy))
				n := 3 + rng.IntN(4)
				var desc []string
				for i := range n {
					name := fmt.Sprintf("c%d", i+1)
					c := f.add(name)
					s := worldStart(rng.IntN(4))
					f.start(name, s)
					if rng.IntN(3) == 0 {
						var fs modFaults
						switch rng.IntN(9) {
						case 0, 1:
							fs.applyFails = true
						case 2, 3:
							fs.verifyFails = true
						case 4:
							fs.lostContact = true
						case 5:
							fs.recordsDown = true
						case 6:
							fs.goneAtApply = true
						case 7:
							fs.cancel = true
						case 8:
							fs.loseLease = true
						}
						c.faults[modules[rng.IntN(3)]] = fs
					}
					desc = append(desc, fmt.Sprintf("%s start %d faults %v", name, s, c.faults))
				}
				if rng.IntN(4) == 0 {
					f.clusters[fmt.Sprintf("c%d", n)].skip = "control plane not initialized"
				}
				if rng.IntN(3) == 0 { // a cluster that stopped matching, maybe unreachable
					c := f.add("left")
					f.start("left", startOld)
					c.picked, c.unreachable = false, rng.IntN(2) == 0
				}
				if rng.IntN(4) == 0 { // a cluster deleted since the last apply
					f.add("deleted")
					f.start("deleted", startCurrent)
					f.clusters["deleted"].deleted = true
				}
				if rng.IntN(4) == 0 { // a module no longer configured
					f.clusters["c1"].mod("legacy").actual = "legacy-r1"
					f.bind("c1", records.ModuleBinding{Module: "legacy", Revision: "legacy-r1", AppliedAt: seededAt, Result: records.BindingApplied})
				}
				req := RunRequest{}
				if rng.IntN(2) == 0 {
					req = f.plan()
					if rng.IntN(3) == 0 { // joins after the plan
						f.add("joined")
					}
					if rng.IntN(4) == 0 { // stops matching after the plan
						f.clusters["c2"].picked = false
					}
				}
				f.apply(req)
				if t.Failed() {
					t.Logf("mode %s, policy update %s max_failures %s max_unsettled %s %s, planned %v\n  %s", mode, policy.UpdateLimit,
						policy.MaxFailures, policy.MaxUnsettled, onFailure, req.PlannedKnown, strings.Join(desc, "\n  "))
				}
			})
		})
	}
}
