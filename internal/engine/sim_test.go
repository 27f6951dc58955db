package engine

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func onR1(name string) simSpec {
	return simSpec{name: name, rec: TargetRecord{Current: "r1", Backup: "r0"}}
}

func specs(names ...string) []simSpec {
	out := make([]simSpec, len(names))
	for i, n := range names {
		out[i] = onR1(n)
	}
	return out
}

func withFaults(ss []simSpec, name string, edit func(*simSpec)) []simSpec {
	for i := range ss {
		if ss[i].name == name {
			edit(&ss[i])
			return ss
		}
	}
	panic("no target " + name)
}

func policy(t testing.TB, limit, maxFailures string, onFailure OnFailure, bake time.Duration, canary ...string) Policy {
	t.Helper()
	mf, err := ParseMaxFailures(maxFailures)
	if err != nil {
		t.Fatal(err)
	}
	return Policy{
		UpdateLimit: mustLimit(t, limit), MaxFailures: mf, OnFailure: onFailure, Canary: canary,
		VerifyTimeout: 2 * time.Second, BakeTime: bake, RollbackTimeout: 30 * time.Second,
	}
}

func mustMaxUnsettled(t testing.TB, s string) Limit {
	t.Helper()
	l, err := ParseMaxUnsettled(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type goldenCase struct {
	sc     scenario
	expect func(t *testing.T, r Result)
}

func wantStatus(t *testing.T, r Result, want map[string]Status) {
	t.Helper()
	for name, s := range want {
		if o, _ := r.Outcome(name); o.Status != s {
			t.Errorf("%s: status %s, want %s (%+v)", name, o.Status, s, o)
		}
	}
}

func goldenCases(t *testing.T) []goldenCase {
	return []goldenCase{
		{
			sc: scenario{
				name: "canary-then-waves", seed: 1,
				targets: append(specs("a", "b", "c", "d", "e", "f"),
					simSpec{name: "g", skip: "control plane not initialized", rec: TargetRecord{Current: "r1"}},
					simSpec{name: "h", rec: TargetRecord{Current: "r2", Backup: "r1"}}),
				policy: policy(t, "2", "0", Rollback, 30*time.Second, "d"),
			},
			expect: func(t *testing.T, r Result) {
				wantStatus(t, r, map[string]Status{"a": StatusSucceeded, "d": StatusSucceeded, "f": StatusSucceeded,
					"g": StatusSkipped, "h": StatusAlreadyCurrent})
				if r.Err() != nil || r.WavesDone != 4 {
					t.Errorf("err %v, %d waves done", r.Err(), r.WavesDone)
				}
			},
		},
		{
			sc: scenario{
				name: "verify-fails-rollback", seed: 2,
				targets: withFaults(specs("a", "b", "c", "d", "e", "f"), "c", func(s *simSpec) { s.faults.verifyFails = true }),
				policy:  policy(t, "2", "0", Rollback, 10*time.Second),
			},
			expect: func(t *testing.T, r Result) {
				wantStatus(t, r, map[string]Status{"a": StatusRolledBack, "b": StatusRolledBack, "c": StatusFailed,
					"d": StatusRolledBack, "e": StatusNotStarted, "f": StatusNotStarted})
				if o, _ := r.Outcome("c"); !o.Invalid || !o.Failed || o.Revision != "r1" {
					t.Errorf("c: %+v", o)
				}
				if !r.Aborted || !r.RolledBack || r.Err() == nil {
					t.Errorf("aborted %v, rolled back %v, err %v", r.Aborted, r.RolledBack, r.Err())
				}
			},
		},
		{
			sc: scenario{
				name: "failures-halt", seed: 3,
				targets: withFaults(withFaults(withFaults(withFaults(
					append(specs("a", "b", "c", "d", "e"), simSpec{name: "f"}, onR1("g")),
					"b", func(s *simSpec) { s.faults.applyFails = true }),
					"c", func(s *simSpec) { s.faults.verifyHangs = true }),
					"e", func(s *simSpec) { s.faults.decays = true }),
					"f", func(s *simSpec) { s.faults.verifyFails = true }),
				policy: policy(t, "3", "3", Halt, 10*time.Second),
			},
			expect: func(t *testing.T, r Result) {
				wantStatus(t, r, map[string]Status{"a": StatusSucceeded, "b": StatusFailed, "c": StatusFailed,
					"d": StatusSucceeded, "e": StatusFailed, "f": StatusFailed, "g": StatusNotStarted})
				// b's apply was rejected by admission: that is the revision's failure too.
				for name, invalid := range map[string]bool{"b": true, "c": true, "e": true, "f": true} {
					if o, _ := r.Outcome(name); o.Invalid != invalid {
						t.Errorf("%s: invalid %v, want %v", name, o.Invalid, invalid)
					}
				}
				if o, _ := r.Outcome("f"); o.Revision != "" {
					t.Errorf("first install f not removed: %+v", o)
				}
				if !r.Aborted || r.RolledBack || r.Failures != 4 {
					t.Errorf("aborted %v, rolled back %v, failures %d", r.Aborted, r.RolledBack, r.Failures)
				}
			},
		},
		{
			sc: scenario{
				name: "cancel-mid-wave", seed: 4,
				targets:  withFaults(specs("a", "b", "c", "d", "e"), "c", func(s *simSpec) { s.faults.restoreFails = true }),
				policy:   policy(t, "3", "0", Rollback, 0),
				cancelAt: 100*time.Millisecond + 500*time.Microsecond,
			},
			expect: func(t *testing.T, r Result) {
				wantStatus(t, r, map[string]Status{"c": StatusUnsettled, "d": StatusNotStarted, "e": StatusNotStarted})
				if !r.Cancelled || r.Failures != 0 || r.Err() == nil {
					t.Errorf("cancelled %v, failures %d, err %v", r.Cancelled, r.Failures, r.Err())
				}
				for _, o := range r.Outcomes {
					if o.Invalid {
						t.Errorf("%s recorded invalid after a cancellation", o.Target)
					}
				}
			},
		},
		{
			sc: scenario{
				name: "resume-interrupted", seed: 5,
				targets: []simSpec{
					{name: "a", rec: TargetRecord{Current: "r1", Backup: "r1", Provisioning: "r2"}, actual: "r2"},
					{name: "b", rec: TargetRecord{Current: "r1", Backup: "r1", Provisioning: "r2"}, actual: "partial r2"},
					{name: "c", rec: TargetRecord{Current: "r1", Backup: "r1", Provisioning: "r3"}, actual: "partial r3"},
					{name: "d", rec: TargetRecord{Current: "r1", Backup: "r1", Provisioning: "r3"}, actual: "partial r3",
						faults: faults{restoreFails: true}},
					{name: "e", rec: TargetRecord{Current: "r1", Backup: "r0"}, faults: faults{goneAt: 2}},
					{name: "f"},
				},
				policy: policy(t, "2", "2", Rollback, 5*time.Second),
			},
			expect: func(t *testing.T, r Result) {
				// b was left with part of r2's objects: applied again (not merely verified), it
				// succeeds. d's restore fails, which counts.
				wantStatus(t, r, map[string]Status{"a": StatusSucceeded, "b": StatusSucceeded, "c": StatusSucceeded,
					"d": StatusUnsettled, "e": StatusGone, "f": StatusSucceeded})
				if r.Failures != 1 || r.Aborted {
					t.Errorf("failures %d, aborted %v", r.Failures, r.Aborted)
				}
			},
		},
		{
			sc: scenario{
				// An infrastructure failure says nothing about the revision: with no budget at
				// all, the unreachable target is left unsettled (not counted, not invalid, not
				// restored) and the rollout goes on.
				name: "unreachable-verify", seed: 7,
				targets: withFaults(specs("a", "b", "c", "d"), "b", func(s *simSpec) { s.faults.unreachable = true }),
				policy:  policy(t, "2", "0", Rollback, 0),
			},
			expect: func(t *testing.T, r Result) {
				// b answered before its change and not after: it lost contact, is restored, is not
				// blamed on the revision, and (max_unsettled 0) no later wave starts. a, which
				// succeeded, stays: the evidence is not against the revision.
				wantStatus(t, r, map[string]Status{"a": StatusSucceeded, "b": StatusLostContact, "c": StatusNotStarted, "d": StatusNotStarted})
				if o, _ := r.Outcome("b"); o.Invalid || o.Failed || o.Unsettled || o.Revision != "r1" {
					t.Errorf("b: %+v", o)
				}
				if r.Failures != 0 || r.LostContact != 1 || !r.Aborted || r.RolledBack || r.Err() == nil {
					t.Errorf("failures %d, lost contact %d, aborted %v, rolled back %v, err %v", r.Failures, r.LostContact, r.Aborted, r.RolledBack, r.Err())
				}
			},
		},
		{
			sc: scenario{
				name: "unreachable-within-max-unsettled", seed: 7,
				targets: withFaults(specs("a", "b", "c", "d"), "b", func(s *simSpec) { s.faults.unreachable = true }),
				policy: func() Policy {
					p := policy(t, "2", "0", Rollback, 0)
					p.MaxUnsettled = mustMaxUnsettled(t, "1")
					return p
				}(),
			},
			expect: func(t *testing.T, r Result) {
				wantStatus(t, r, map[string]Status{"a": StatusSucceeded, "b": StatusLostContact, "c": StatusSucceeded, "d": StatusSucceeded})
				if r.Aborted || r.Err() != nil || len(r.Warnings()) != 1 {
					t.Errorf("aborted %v, err %v, warnings %q", r.Aborted, r.Err(), r.Warnings())
				}
			},
		},
		{
			sc: scenario{
				name: "flaky-records", seed: 6,
				targets:     withFaults(specs("a", "b", "c", "d", "e", "f"), "c", func(s *simSpec) { s.faults.verifyFails = true }),
				policy:      policy(t, "3", "1", Rollback, 0),
				recordFailP: 0.25,
			},
		},
	}
}

// TestSimulationGolden runs fixed scenarios and compares plan, log and
// result with testdata/<name>.golden; -update rewrites them.
func TestSimulationGolden(t *testing.T) {
	for _, gc := range goldenCases(t) {
		t.Run(gc.sc.name, func(t *testing.T) {
			plan, res, w := simulate(t, gc.sc)
			if gc.expect != nil {
				gc.expect(t, res)
			}
			got := fmt.Sprintf("scenario %s (seed %d)\n%slog:\n%s", gc.sc.name, gc.sc.seed, summary(plan, res), w.render())
			path := filepath.Join("testdata", gc.sc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the golden file (run with -update if the change is intended):\n%s", path, diff(string(want), got))
			}
		})
	}
}

// randomScenario builds a scenario from seed: fleet size, policy, record
// shapes, faults and the moment of cancellation are all drawn from it.
func randomScenario(t testing.TB, seed uint64) scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	n := 1 + rng.IntN(24)
	limit := strconv.Itoa(1 + rng.IntN(5))
	if rng.IntN(2) == 0 {
		limit = strconv.Itoa(1+rng.IntN(100)) + "%"
	}
	maxFailures := []string{"0", "0", "1", "2", "20%"}[rng.IntN(5)]
	onFailure := []OnFailure{Rollback, Halt, ""}[rng.IntN(3)]
	bake := []time.Duration{0, 10 * time.Second, 30 * time.Second}[rng.IntN(3)]
	sc := scenario{name: "random", seed: seed, policy: policy(t, limit, maxFailures, onFailure, bake)}

	p := rng.Float64() * 0.25 // how faulty this world is
	for i := range n {
		s := onR1(fmt.Sprintf("c%02d", i))
		switch k := rng.Float64(); {
		case k < 0.08:
			s.skip = "control plane not initialized"
		case k < 0.16:
			s.rec = TargetRecord{Current: "r2", Backup: "r1"}
		case k < 0.24:
			s.rec = TargetRecord{}
		case k < 0.30:
			s.rec = TargetRecord{Current: "r1", Backup: "r1", Provisioning: "r2"}
			s.actual = []string{"r2", "partial r2"}[rng.IntN(2)]
		case k < 0.36:
			s.rec = TargetRecord{Current: "r1", Backup: "r1", Provisioning: "r3"}
			s.actual = "partial r3"
		case k < 0.38:
			s.rec = TargetRecord{Current: "r2", Backup: "r2", Provisioning: "r3"}
			s.actual = "partial r3"
		}
		f := &s.faults
		f.applyFails = rng.Float64() < p/2
		f.verifyFails = rng.Float64() < p/2
		f.verifyHangs = rng.Float64() < p/4
		f.decays = rng.Float64() < p/3
		f.restoreFails = rng.Float64() < p/3
		f.restoreHangs = rng.Float64() < p/6
		if rng.Float64() < 0.05 {
			f.goneAt = 1 + rng.IntN(4)
		}
		sc.targets = append(sc.targets, s)
	}
	if rng.IntN(2) == 0 {
		for range 1 + rng.IntN(3) {
			if rng.IntN(5) == 0 {
				sc.policy.Canary = append(sc.policy.Canary, "ghost")
			} else {
				sc.policy.Canary = append(sc.policy.Canary, sc.targets[rng.IntN(n)].name)
			}
		}
	}
	if rng.IntN(10) < 3 {
		// A random point of the run: some step of the clock.
		sc.cancelStep = 1 + rng.IntN(4*n)
	}
	if rng.IntN(5) == 0 {
		sc.recordFailP = 0.05
	}
	if rng.IntN(3) == 0 {
		// Stages: each target in one of two or three (or in none), each stage with limits of
		// its own, sometimes promoted only part of the way.
		k := 2 + rng.IntN(2)
		for i := range k {
			st := Stage{Name: fmt.Sprintf("s%d", i+1), UpdateLimit: mustLimit(t, strconv.Itoa(1+rng.IntN(4))),
				BakeTime: []time.Duration{0, 20 * time.Second}[rng.IntN(2)]}
			st.MaxFailures, _ = ParseMaxFailures([]string{"0", "1", "50%"}[rng.IntN(3)])
			sc.policy.Stages = append(sc.policy.Stages, st)
		}
		for _, tg := range sc.targets {
			if i := rng.IntN(k + 1); i < k {
				sc.policy.Stages[i].Members = append(sc.policy.Stages[i].Members, tg.name)
			}
		}
		if rng.IntN(2) == 0 {
			sc.policy.PromoteUntil = sc.policy.Stages[rng.IntN(k)].Name
		}
	}
	return sc
}

// TestSimulation runs many seeded random worlds, checking the invariants
// after every call, record and step (see simWorld), and that the seeds
// between them exercised every kind of trouble.
func TestSimulation(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		sc := randomScenario(t, seed)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			_, res, _ := simulate(t, sc)
			if res.Aborted {
				seen["run aborted"]++
			}
			if res.RolledBack {
				seen["run rolled back"]++
			}
			if res.Cancelled {
				seen["run cancelled"]++
			}
			for _, o := range res.Outcomes {
				seen[string(o.Status)]++
				if o.Invalid {
					seen["invalid"]++
				}
				if o.Unsettled {
					seen["unsettled"]++
				}
			}
		})
	}
	t.Logf("outcomes over 200 seeds: %v", seen)
	for _, want := range []string{"run aborted", "run rolled back", "run cancelled", "invalid", "unsettled",
		string(StatusSucceeded), string(StatusFailed), string(StatusRolledBack), string(StatusCancelled),
		string(StatusRestored), string(StatusGone), string(StatusNotStarted), string(StatusSkipped), string(StatusAlreadyCurrent)} {
		if seen[want] == 0 {
			t.Errorf("no seed produced %q: the simulation no longer covers it", want)
		}
	}
}

// TestSimulationDeterministic checks that a seed always gives the same log,
// which is what makes golden files possible.
func TestSimulationDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		sc := randomScenario(t, seed)
		p1, r1, w1 := simulate(t, sc)
		p2, r2, w2 := simulate(t, sc)
		a, b := summary(p1, r1)+w1.render(), summary(p2, r2)+w2.render()
		if a != b {
			t.Fatalf("seed %d is not deterministic:\n%s", seed, diff(a, b))
		}
	}
}

// diff shows the first differing lines of two texts.
func diff(want, got string) string {
	wl, gl := splitLines(want), splitLines(got)
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n-want %s\n+got  %s", i+1, w, g)
		}
	}
	return "(no difference)"
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
