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
	a := f.applyUnchecked(req)
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

// applyUnchecked is apply without the invariants, for runs refused before they start.
func (f *fakeFleet) applyUnchecked(req RunRequest) assignRun {
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
	a.r = newRun(ctx, f, req, func() time.Time { return runAt }, delivery.SettleTimeout)
	a.res, a.err = a.r.execute(ctx)
	a.r.stopSettling()
	a.err = delivery.LeaseLost(ctx, a.err, "Assignment "+f.spec.Key.Describe())
	a.cancelled, a.fenced = ctx.Err() != nil, f.fenced
	a.after = f.bindings()
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
				// A module whose records were deleted outside the provider (unrecorded) keeps a
				// binding that its records no longer back: held back, left as it was.
				stale := unchanged && (a.fenced && delivered || c.deleted || st.unrecorded)
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

// bound returns the binding of module on cluster after the run, "" fields when none.
func (a assignRun) bound(cluster, module string) records.ModuleBinding {
	b, _ := (&Observation{Bindings: a.after}).Binding(cluster, module)
	return b
}

// wantBinding checks one binding after the run: result, and a reason that contains reason.
func wantBinding(t *testing.T, a assignRun, cluster, module string, result records.BindingResult, reason string) {
	t.Helper()
	b := a.bound(cluster, module)
	if b.Result != result || !strings.Contains(b.Reason, reason) {
		t.Errorf("%s module %s bound %+v, want %q with reason containing %q", cluster, module, b, result, reason)
	}
	if result == records.BindingApplied && b.AppliedAt.IsZero() {
		t.Errorf("%s module %s bound applied without a time", cluster, module)
	}
}

// runsOn lists the clusters each module was delivered to, "module:c1,c2" joined by spaces.
func (f *fakeFleet) runsOn() string {
	var out []string
	for _, rc := range f.runs {
		out = append(out, rc.module+":"+strings.Join(rc.only, ","))
	}
	return strings.Join(out, " ")
}

func (f *fakeFleet) destroysOn() string {
	var out []string
	for _, d := range f.destroys {
		out = append(out, fmt.Sprintf("%s:%s:keep=%v", d.module, strings.Join(d.clusters, ","), d.keep))
	}
	return strings.Join(out, " ")
}

// TestWorldScenarios are named fault scenarios, checked by the invariants and by what each
// one must leave.
func TestWorldScenarios(t *testing.T) {
	for _, sc := range []struct {
		name   string
		policy engine.Policy
		mode   Mode
		setup  func(f *fakeFleet)
		// planned plans first; between runs after the plan, before apply.
		planned bool
		between func(f *fakeFleet)
		want    func(t *testing.T, f *fakeFleet, a assignRun)
	}{{
		name:   "an apply failure within the budget blocks the module's dependents on that cluster only",
		policy: worldPolicy(1, 1, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.add("c2").faults["crds"] = modFaults{applyFails: true}
			f.add("c3")
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if a.err != nil {
				t.Errorf("a failure within max_failures failed the run: %v", a.err)
			}
			wantBinding(t, a, "c2", "crds", records.BindingFailed, "admission webhook")
			wantBinding(t, a, "c2", "app", records.BindingBlocked, "depends on module crds, which is failed")
			wantBinding(t, a, "c2", "mon", records.BindingBlocked, "depends on module app, which is blocked")
			for _, c := range []string{"c1", "c3"} {
				for _, m := range []string{"crds", "app", "mon"} {
					wantBinding(t, a, c, m, records.BindingApplied, "")
				}
			}
			if got := f.runsOn(); got != "crds:c1,c2,c3 app:c1,c3 mon:c1,c3" {
				t.Errorf("delivered %s", got)
			}
			if st := f.clusters["c2"].mods["crds"]; st.actual != "" || st.rec.Invalid["crds-r2"] == "" {
				t.Errorf("c2 crds runs %q, records %+v: want removed and recorded invalid", st.actual, st.rec)
			}
			if !slices.ContainsFunc(a.res.Warnings, func(w string) bool { return strings.HasPrefix(w, "module crds: ") && strings.Contains(w, "c2") }) {
				t.Errorf("no warning names the failure: %v", a.res.Warnings)
			}
		},
	}, {
		// Each module goes through delivery's Run, which holds back a cluster whose records of
		// the module are gone while its objects are there (delivery.HoldUnrecorded): the
		// assignment keeps that module's binding as it was, nothing of it changes there, and
		// the cluster reads records-missing, the worst state, in the assignment's attention.
		name:   "a module whose records are gone on a cluster is held back there and shown, not restored to nothing",
		policy: worldPolicy(1, 0, engine.Rollback),
		mode:   Reconcile,
		setup: func(f *fakeFleet) {
			for _, c := range []string{"c1", "c2", "c3"} {
				f.add(c)
				f.start(c, startOld)
			}
			f.clusters["c2"].faults["app"] = modFaults{verifyFails: true} // would fail, were it applied
			st := f.clusters["c2"].mod("app")
			st.unrecorded, st.rec = true, engine.TargetRecord{Invalid: map[string]string{}}
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if a.err != nil {
				t.Errorf("a held-back cluster failed the run: %v", a.err)
			}
			if b := a.bound("c2", "app"); b.Revision != "app-r1" || b.AppliedAt != seededAt {
				t.Errorf("c2 app bound %+v: want its old binding as it was", b)
			}
			if st := f.clusters["c2"].mods["app"]; st.actual != "app-r1" {
				t.Errorf("c2 app runs %q, want app-r1 (what ran before) left in place", st.actual)
			}
			for _, o := range f.runOutcomes("app") {
				if o.Target == "c2" && o.Status != engine.StatusSkipped {
					t.Errorf("c2 app ended %s (%s), want skipped", o.Status, o.Error)
				}
			}
			obs, err := observe(context.Background(), f, fleet.Query{Namespace: f.spec.ClusterNamespace}, f.spec, true)
			if err != nil {
				t.Fatal(err)
			}
			_, attention := Summarize(Status(obs, f.spec))
			if note := attention["c2"]; !strings.HasPrefix(note, "records-missing: module app records missing: holds 1 object of this rollout") {
				t.Errorf("c2 attention %q, want records-missing naming module app", note)
			}
		},
	}, {
		name:   "a verify failure past the budget halts the module and blocks what depends on it",
		policy: worldPolicy(1, 0, engine.Halt),
		mode:   Reconcile,
		setup: func(f *fakeFleet) {
			for _, c := range []string{"c1", "c2", "c3"} {
				f.add(c)
				f.start(c, startPartial)
			}
			f.clusters["c2"].faults["app"] = modFaults{verifyFails: true}
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if ue, ok := usererr.As(a.err); !ok || !strings.Contains(ue.Detail, "module app: ") {
				t.Errorf("err %v, want the assignment failed naming module app", a.err)
			}
			wantBinding(t, a, "c1", "app", records.BindingApplied, "")
			wantBinding(t, a, "c2", "app", records.BindingFailed, "not ready")
			if b := a.bound("c3", "app"); b.Revision != "app-r1" || b.AppliedAt != seededAt {
				t.Errorf("c3 app, not started, bound %+v: want its old binding as it was", b)
			}
			if st := f.clusters["c2"].mods["app"]; st.actual != "app-r1" || st.rec.Current != "app-r1" {
				t.Errorf("c2 app runs %q (%+v), want restored to app-r1", st.actual, st.rec)
			}
			// mon goes to c1 only: c2's app failed; c3's app is still the old one, bound applied.
			if got := f.runsOn(); got != "crds:c1,c2,c3 app:c1,c2,c3 mon:c1,c3" {
				t.Errorf("delivered %s", got)
			}
			wantBinding(t, a, "c2", "mon", records.BindingBlocked, "depends on module app, which is failed")
		},
	}, {
		name:   "an unreachable cluster is skipped and left as it is",
		policy: worldPolicy(2, 0, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.add("c2").skip = "control plane not initialized"
			f.start("c2", startOld)
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if a.err != nil || a.res.Skipped["c2"] != "control plane not initialized" {
				t.Errorf("err %v, skipped %v", a.err, a.res.Skipped)
			}
			if got := f.runsOn(); got != "crds:c1 app:c1 mon:c1" {
				t.Errorf("delivered %s", got)
			}
			if b := a.bound("c2", "app"); b.Revision != "app-r1" || b.AppliedAt != seededAt {
				t.Errorf("skipped c2 bound %+v, want its old binding", b)
			}
		},
	}, {
		name:   "a cluster that loses contact after its change is bound failed and halts the module",
		policy: worldPolicy(1, 2, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1").faults["app"] = modFaults{lostContact: true}
			f.add("c2")
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			wantBinding(t, a, "c1", "app", records.BindingFailed, "connection refused")
			if st := f.clusters["c1"].mods["app"]; st.rec.Provisioning != "app-r2" {
				t.Errorf("c1 app records %+v, want still provisioning app-r2 for the next apply", st.rec)
			}
			if _, ok := f.delivered("app", "c2"); !ok || a.bound("c2", "app").Result != "" {
				t.Errorf("c2 app bound %+v, want not started and unbound (max_unsettled 0 halts)", a.bound("c2", "app"))
			}
			wantBinding(t, a, "c2", "mon", records.BindingBlocked, "depends on module app, which is not applied")
			if a.err == nil {
				t.Error("the run did not fail")
			}
		},
	}, {
		name:    "cancellation mid-run restores what was in flight, records it, and lets go of nothing",
		policy:  worldPolicy(1, 0, engine.Rollback),
		planned: true,
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.add("c2").faults["app"] = modFaults{cancel: true}
			f.add("c3")
			f.add("left")
			f.start("left", startOld)
			f.clusters["left"].picked = false
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if !a.cancelled || a.err == nil || !strings.Contains(a.err.Error(), "cancelled: interrupted (Ctrl-C)") {
				t.Errorf("err %v, want cancelled", a.err)
			}
			wantBinding(t, a, "c1", "app", records.BindingApplied, "")
			// Written after the cancellation, within the settle bound.
			wantBinding(t, a, "c2", "app", records.BindingFailed, "context canceled")
			if st := f.clusters["c2"].mods["app"]; st.actual != "" || st.rec.Provisioning != "" {
				t.Errorf("c2 app runs %q, records %+v: want restored to nothing", st.actual, st.rec)
			}
			if got := f.runsOn(); got != "crds:c1,c2,c3 app:c1,c2,c3" {
				t.Errorf("delivered %s, want nothing after the cancellation", got)
			}
			if b := a.bound("c3", "mon"); b.Result != "" {
				t.Errorf("c3 mon bound %+v after the cancellation", b)
			}
			if len(f.destroys) != 0 || a.bound("left", "crds").Result != records.BindingApplied {
				t.Errorf("a cancelled run let go: %s", f.destroysOn())
			}
		},
	}, {
		name:   "after the Lease is lost nothing more is written",
		policy: worldPolicy(1, 0, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.add("c2").faults["app"] = modFaults{loseLease: true}
			f.add("c3")
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if ue, ok := usererr.As(a.err); !ok || ue.Summary != "Lease Lost" {
				t.Errorf("err %v, want Lease Lost", a.err)
			}
			// The module before is bound; the one whose run lost the Lease is bound nowhere,
			// not even where it succeeded before the loss (its bindings follow its run).
			wantBinding(t, a, "c1", "crds", records.BindingApplied, "")
			for _, c := range []string{"c1", "c2", "c3"} {
				if b := a.bound(c, "app"); b.Result != "" {
					t.Errorf("%s app bound %+v after the Lease was lost", c, b)
				}
			}
			if st := f.clusters["c2"].mods["app"]; st.rec.Provisioning != "app-r2" {
				t.Errorf("c2 app records %+v: want left in flight (no restore without the Lease)", st.rec)
			}
		},
	}, {
		name:    "clusters that join or leave after the plan wait for the next plan; the planned leaver is let go, dependents first",
		policy:  worldPolicy(2, 0, engine.Rollback),
		planned: true,
		setup: func(f *fakeFleet) {
			for _, c := range []string{"c1", "c2", "left"} {
				f.add(c)
				f.start(c, startCurrent)
			}
			f.clusters["left"].picked = false
		},
		between: func(f *fakeFleet) {
			f.add("joined")
			f.clusters["c2"].picked = false
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if a.err != nil || len(f.runs) != 0 {
				t.Errorf("err %v, delivered %s", a.err, f.runsOn())
			}
			if got := f.destroysOn(); got != "mon:left:keep=true app:left:keep=true crds:left:keep=true" {
				t.Errorf("let go %s", got)
			}
			if _, ok := a.after["left"]; ok || len(f.clusters["left"].mods) != 0 {
				t.Errorf("left keeps %v, runs %v", a.after["left"], f.clusters["left"].mods)
			}
			if len(a.after["c2"]) != 3 || len(a.after["joined"]) != 0 {
				t.Errorf("c2 bound %v, joined bound %v: want both as they were", a.after["c2"], a.after["joined"])
			}
		},
	}, {
		name:    "an unreachable leaving cluster keeps its bindings and is named",
		policy:  worldPolicy(1, 0, engine.Rollback),
		planned: true,
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.add("left").unreachable = true
			f.start("left", startCurrent)
			f.clusters["left"].picked = false
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if a.err != nil || len(a.after["left"]) != 3 {
				t.Errorf("err %v, left bound %v: want kept for a later apply", a.err, a.after["left"])
			}
			if !slices.ContainsFunc(a.res.Warnings, func(w string) bool { return strings.Contains(w, "cluster left: unreachable") }) {
				t.Errorf("warnings %v do not name it", a.res.Warnings)
			}
		},
	}, {
		name:   "a deleted cluster's bindings and a removed module go",
		policy: worldPolicy(1, 0, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.start("c1", startCurrent)
			f.clusters["c1"].mod("legacy").actual = "legacy-r1"
			f.bind("c1", records.ModuleBinding{Module: "legacy", Revision: "legacy-r1", Result: records.BindingApplied})
			f.add("deleted")
			f.start("deleted", startCurrent)
			f.clusters["deleted"].deleted = true
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if a.err != nil || len(a.after["deleted"]) != 0 {
				t.Errorf("err %v, deleted bound %v", a.err, a.after["deleted"])
			}
			if got := f.destroysOn(); got != "legacy:c1:keep=false" {
				t.Errorf("removed %s", got)
			}
			if _, ok := f.clusters["c1"].mods["legacy"]; ok || a.bound("c1", "legacy").Module != "" {
				t.Errorf("legacy still on c1: %v", a.after["c1"])
			}
			if len(a.res.Bindings["c1"]) != 3 {
				t.Errorf("result bindings %v, want the configured modules", a.res.Bindings["c1"])
			}
		},
	}, {
		name:   "a removed module stays, bound, on a cluster that cannot be changed now",
		policy: worldPolicy(1, 0, engine.Rollback),
		setup: func(f *fakeFleet) {
			for _, name := range []string{"c1", "c2"} {
				f.add(name)
				f.start(name, startCurrent)
				f.clusters[name].mod("legacy").actual = "legacy-r1"
				f.bind(name, records.ModuleBinding{Module: "legacy", Revision: "legacy-r1", Result: records.BindingApplied})
			}
			f.clusters["c2"].skip = "control plane not initialized"
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if got := f.destroysOn(); got != "legacy:c1:keep=false" {
				t.Errorf("removed %s, want legacy from c1 only", got)
			}
			if _, ok := f.clusters["c2"].mods["legacy"]; !ok || a.bound("c2", "legacy").Module != "legacy" {
				t.Errorf("c2 lost legacy or its binding (%v): a later apply could not finish the removal", a.after["c2"])
			}
			if a.bound("c1", "legacy").Module != "" {
				t.Errorf("c1 still bound to legacy: %v", a.after["c1"])
			}
			if !slices.ContainsFunc(a.res.Warnings, func(w string) bool { return strings.Contains(w, "module legacy stays there") }) {
				t.Errorf("warnings %v do not say legacy stays on c2", a.res.Warnings)
			}
		},
	}, {
		name:   "ApplyOnce keeps what a cluster got; Reconcile takes it to the new revision",
		policy: worldPolicy(2, 0, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.start("c1", startOld)
			f.add("c2")
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if got := f.runsOn(); got != "crds:c2 app:c2 mon:c2" {
				t.Errorf("delivered %s", got)
			}
			if b := a.bound("c1", "app"); b.Revision != "app-r1" || b.AppliedAt != seededAt {
				t.Errorf("c1 app bound %+v, want kept", b)
			}
			if b := a.bound("c2", "app"); b.AppliedAt != runAt.Truncate(time.Second) {
				t.Errorf("c2 app applied at %v, want the run's clock truncated to the second", b.AppliedAt)
			}
		},
	}, {
		name:   "Reconcile updates every module in depends_on order",
		mode:   Reconcile,
		policy: worldPolicy(2, 0, engine.Rollback),
		setup: func(f *fakeFleet) {
			f.add("c1")
			f.start("c1", startOld)
			f.add("c2")
			f.start("c2", startCurrent)
		},
		want: func(t *testing.T, f *fakeFleet, a assignRun) {
			if got := f.runsOn(); got != "crds:c1,c2 app:c1,c2 mon:c1,c2" {
				t.Errorf("delivered %s", got)
			}
			if o, _ := f.delivered("app", "c2"); o.Status != engine.StatusAlreadyCurrent || a.bound("c2", "app").AppliedAt != seededAt {
				t.Errorf("c2 app %s bound %+v: want already current, binding kept with its time", o.Status, a.bound("c2", "app"))
			}
			wantBinding(t, a, "c1", "mon", records.BindingApplied, "")
		},
	}} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mode := cmpOr(sc.mode, ApplyOnce)
				f := newFakeFleet(t, worldSpec(t, mode, sc.policy))
				sc.setup(f)
				var req RunRequest
				if sc.planned {
					req = f.plan()
				}
				if sc.between != nil {
					sc.between(f)
				}
				sc.want(t, f, f.apply(req))
			})
		})
	}
}

func cmpOr(m, def Mode) Mode {
	if m == "" {
		return def
	}
	return m
}

// Refusals before anything changes: a claim on the objects by another owner, and a Create of an
// assignment a Terraform state holds already.
func TestWorldRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFleet(t, worldSpec(t, ApplyOnce, worldPolicy(1, 0, engine.Rollback)))
		f.add("c1")
		f.add("c2")
		f.claims["app"] = []delivery.Claim{{Cluster: "c2", Object: "ConfigMap demo/web-config", Owner: records.Key{Kind: "rollout", Namespace: "fleet", Name: "web"}}}
		a := f.applyUnchecked(RunRequest{})
		if ue, ok := usererr.As(a.err); !ok || ue.Summary != "Object Claimed By Two Owners" || !strings.Contains(ue.Detail, "rollout fleet/web") {
			t.Errorf("err %v, want the claim refused", a.err)
		}
		if len(f.runs) != 0 || len(a.after) != 0 || a.res == nil || len(a.res.Bindings) != 0 {
			t.Errorf("a refused run delivered %s, bound %v, result %+v", f.runsOn(), a.after, a.res)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFleet(t, worldSpec(t, ApplyOnce, worldPolicy(1, 0, engine.Rollback)))
		f.add("c1")
		if err := records.NewManagementStore(f.base, f.spec.RecordNamespace).SaveProgress(context.Background(), f.spec.Key,
			records.Progress{Phase: records.PhaseSucceeded, Managed: true}); err != nil {
			t.Fatal(err)
		}
		a := f.applyUnchecked(RunRequest{Create: true, ImportHint: "terraform import gradual_module_assignment.base fleet/base"})
		if ue, ok := usererr.As(a.err); !ok || ue.Summary != "Module Assignment Already Exists" || !strings.Contains(ue.Detail, "terraform import") {
			t.Errorf("err %v, want the create refused with the import hint", a.err)
		}
		if a.res != nil || len(f.runs) != 0 || f.progress().Phase != records.PhaseSucceeded {
			t.Errorf("a refused create delivered %s, result %+v, progress %s", f.runsOn(), a.res, f.progress().Phase)
		}
	})
}

// runOutcomes lists the outcomes of module's delivery runs, in order.
func (f *fakeFleet) runOutcomes(module string) []engine.Outcome {
	var out []engine.Outcome
	for _, rc := range f.runs {
		if rc.module == module {
			out = append(out, rc.res.Outcomes...)
		}
	}
	return out
}
