package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// targets returns eligible targets on revision "r1" with backup "r0".
func targets(names ...string) []Target {
	out := make([]Target, len(names))
	for i, n := range names {
		out[i] = Target{Name: n, Record: TargetRecord{Current: "r1", Backup: "r0"}}
	}
	return out
}

func mustLimit(t testing.TB, s string) Limit {
	t.Helper()
	l, err := ParseLimit(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func with(ts []Target, name string, edit func(*Target)) []Target {
	for i := range ts {
		if ts[i].Name == name {
			edit(&ts[i])
			return ts
		}
	}
	panic("no target " + name)
}

func TestPlanRollout(t *testing.T) {
	tests := []struct {
		name        string
		targets     []Target
		limit       string
		canary      []string
		wantLimit   int
		wantWaves   [][]string
		wantCanary  int
		wantResume  []string
		wantIntents map[string]Intent // checked for the names given (Current/Provisioning ignored)
		wantNotes   []string          // each must appear among the notes
	}{
		{
			name:      "waves of update_limit in name order",
			targets:   targets("e", "c", "a", "d", "b"),
			limit:     "2",
			wantLimit: 2,
			wantWaves: [][]string{{"a", "b"}, {"c", "d"}, {"e"}},
			wantIntents: map[string]Intent{
				"a": {Action: ActionApply, RestoreTo: "r1", Wave: 1},
				"e": {Action: ActionApply, RestoreTo: "r1", Wave: 3},
			},
			wantNotes: []string{
				"r2 to 5 eligible of 5 targets: up to 2 at a time (update_limit 2), tolerating 0 failures (max_failures 0)",
				"wave 1/3: a, b", "wave 2/3: c, d", "wave 3/3: e",
			},
		},
		{
			name: "percentage of eligible targets, rounded up",
			targets: with(with(targets("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"), "c", func(t *Target) {
				t.SkipReason = "control plane not initialized"
			}), "h", func(t *Target) { t.SkipReason = "kubeconfig secret missing" }),
			limit:     "25%",
			wantLimit: 2, // 25% of 8 eligible
			wantWaves: [][]string{{"a", "b"}, {"d", "e"}, {"f", "g"}, {"i", "j"}},
			wantIntents: map[string]Intent{
				"c": {Action: ActionSkip, Reason: "control plane not initialized"},
			},
			wantNotes: []string{"skip c: control plane not initialized", "skip h: kubeconfig secret missing",
				"r2 to 8 eligible of 10 targets: up to 2 at a time (update_limit 25%)"},
		},
		{
			name:       "canaries first in given order, in their own waves",
			targets:    targets("a", "b", "c", "z", "y"),
			limit:      "2",
			canary:     []string{"z", "a", "c"},
			wantLimit:  2,
			wantWaves:  [][]string{{"z", "a"}, {"c"}, {"b", "y"}},
			wantCanary: 2,
			wantIntents: map[string]Intent{
				"z": {Action: ActionApply, RestoreTo: "r1", Wave: 1, Canary: true},
				"c": {Action: ActionApply, RestoreTo: "r1", Wave: 2, Canary: true},
				"b": {Action: ActionApply, RestoreTo: "r1", Wave: 3},
			},
			wantNotes: []string{"wave 1/3 (canary): z, a", "wave 2/3 (canary): c", "wave 3/3: b, y"},
		},
		{
			name: "unknown, repeated, skipped and current canaries",
			targets: with(with(targets("a", "b", "c"), "b", func(t *Target) { t.SkipReason = "paused" }),
				"c", func(t *Target) { t.Record.Current = "r2" }),
			limit:      "1",
			canary:     []string{"x", "b", "c", "a", "a"},
			wantLimit:  1,
			wantWaves:  [][]string{{"a"}},
			wantCanary: 1,
			wantIntents: map[string]Intent{
				"b": {Action: ActionSkip, Reason: "paused", Canary: true},
				"c": {Action: ActionAlreadyCurrent, Canary: true},
			},
			wantNotes: []string{"canary x: not among the targets", "skip b: paused", "already on r2: c", "wave 1/1 (canary): a"},
		},
		{
			name: "interrupted targets are resumed first",
			targets: with(with(with(with(targets("a", "b", "c", "d", "e"),
				"a", func(t *Target) { t.Record.Provisioning = "r2" }),
				"b", func(t *Target) { t.Record.Provisioning = "r9" }),
				"c", func(t *Target) { t.Record = TargetRecord{Current: "r2", Backup: "r2", Provisioning: "r3"} }),
				"e", func(t *Target) { t.Record = TargetRecord{Provisioning: "r2"} }),
			limit:      "100%",
			wantLimit:  5,
			wantResume: []string{"b"},
			wantWaves:  [][]string{{"a", "b", "c", "d", "e"}},
			wantIntents: map[string]Intent{
				"a": {Action: ActionApply, Reason: "interrupted while applying r2; applied again", RestoreTo: "r0", Wave: 1},
				"b": {Action: ActionRestore, Reason: "interrupted while applying r9", RestoreTo: "r0", Wave: 1},
				"c": {Action: ActionApply, Reason: "interrupted while applying r3; applied again", RestoreTo: "r2", Wave: 1},
				"d": {Action: ActionApply, RestoreTo: "r1", Wave: 1},
				"e": {Action: ActionApply, Reason: "interrupted while applying r2; applied again", RestoreTo: "", Wave: 1},
			},
			wantNotes: []string{
				"resume b: restore to r0 (interrupted while applying r9)",
				"resume a: interrupted while applying r2; applied again",
				"resume c: interrupted while applying r3; applied again",
				"resume e: interrupted while applying r2; applied again",
				"wave 1/1: a, b, c, d, e",
			},
		},
		{
			name: "an interrupted rollback is completed first",
			targets: with(targets("a", "b"),
				"a", func(t *Target) {
					t.Record = TargetRecord{Current: "r2", Backup: "r1", Provisioning: "r2", RollingBack: true}
				}),
			limit:      "1",
			wantLimit:  1,
			wantResume: []string{"a"},
			wantWaves:  [][]string{{"a"}, {"b"}},
			wantIntents: map[string]Intent{
				"a": {Action: ActionRestore, Reason: "interrupted while rolling back r2", RestoreTo: "r1", Wave: 1},
				"b": {Action: ActionApply, RestoreTo: "r1", Wave: 2},
			},
			wantNotes: []string{
				"resume a: restore to r1 (interrupted while rolling back r2)",
				"wave 1/2: a",
				"wave 2/2: b",
			},
		},
		{
			name:      "unreachable interrupted target is skipped, saying so",
			targets:   with(targets("a"), "a", func(t *Target) { t.SkipReason = "paused"; t.Record.Provisioning = "r2" }),
			limit:     "1",
			wantLimit: 1,
			wantNotes: []string{"skip a: paused (left while applying r2; settled once reachable)", "nothing to do"},
		},
		{
			name:      "first install restores to nothing",
			targets:   []Target{{Name: "new"}},
			limit:     "1",
			wantLimit: 1,
			wantWaves: [][]string{{"new"}},
			wantIntents: map[string]Intent{
				"new": {Action: ActionApply, RestoreTo: "", Wave: 1},
			},
		},
		{
			name:      "no targets",
			limit:     "10%",
			wantLimit: 1,
			wantNotes: []string{"r2 to 0 eligible of 0 targets: up to 1 at a time (update_limit 10%), tolerating 0 failures (max_failures 0)", "nothing to do"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanRollout(tt.targets, "r2", Policy{UpdateLimit: mustLimit(t, tt.limit), Canary: tt.canary})
			if p.UpdateLimit != tt.wantLimit {
				t.Errorf("UpdateLimit = %d, want %d", p.UpdateLimit, tt.wantLimit)
			}
			if !reflect.DeepEqual(p.Waves, tt.wantWaves) {
				t.Errorf("Waves = %q, want %q", p.Waves, tt.wantWaves)
			}
			if p.CanaryWaves != tt.wantCanary {
				t.Errorf("CanaryWaves = %d, want %d", p.CanaryWaves, tt.wantCanary)
			}
			if !slices.Equal(p.Resume, tt.wantResume) {
				t.Errorf("Resume = %q, want %q", p.Resume, tt.wantResume)
			}
			for name, want := range tt.wantIntents {
				got := p.Intents[name]
				got.Current, got.Provisioning = "", ""
				if got != want {
					t.Errorf("Intents[%s] = %+v, want %+v", name, got, want)
				}
			}
			for _, w := range tt.wantNotes {
				if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.HasPrefix(n, w) }) {
					t.Errorf("no note %q in:\n%s", w, strings.Join(p.Notes, "\n"))
				}
			}
			assertPlanShape(t, p, tt.targets)
		})
	}
}

// assertPlanShape checks what must hold for every plan.
func assertPlanShape(t *testing.T, p Plan, ts []Target) {
	t.Helper()
	seen := map[string]bool{}
	for i, wave := range p.Waves {
		if len(wave) == 0 || len(wave) > p.UpdateLimit {
			t.Errorf("wave %d has %d targets, limit %d", i+1, len(wave), p.UpdateLimit)
		}
		for _, name := range wave {
			if seen[name] {
				t.Errorf("%s in two waves", name)
			}
			seen[name] = true
			if in := p.Intents[name]; in.Wave != i+1 || (in.Action != ActionApply && in.Action != ActionRestore) {
				t.Errorf("%s in wave %d has intent %+v", name, i+1, in)
			}
			if p.Intents[name].Canary != (i < p.CanaryWaves) {
				t.Errorf("%s: canary %v in wave %d of %d canary waves", name, p.Intents[name].Canary, i+1, p.CanaryWaves)
			}
		}
	}
	if len(p.Order) != len(p.Intents) {
		t.Errorf("%d targets in order, %d intents", len(p.Order), len(p.Intents))
	}
	for _, tg := range ts {
		in, ok := p.Intents[tg.Name]
		if !ok {
			t.Errorf("no intent for %s", tg.Name)
		}
		if (in.Action == ActionSkip) != (tg.SkipReason != "") {
			t.Errorf("%s: skip reason %q but intent %s", tg.Name, tg.SkipReason, in.Action)
		}
		if in.Action == ActionApply && !seen[tg.Name] {
			t.Errorf("%s is to be applied but in no wave", tg.Name)
		}
	}
}

func TestPlanRolloutDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ts := targets("a", "b", "c", "d", "e", "f", "g")
	ts = with(ts, "b", func(t *Target) { t.SkipReason = "paused" })
	ts = with(ts, "f", func(t *Target) { t.Record.Provisioning = "r2" })
	pol := Policy{UpdateLimit: mustLimit(t, "50%"), Canary: []string{"g", "c"}}
	want := PlanRollout(ts, "r2", pol)
	for range 20 {
		rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
		if got := PlanRollout(ts, "r2", pol); !reflect.DeepEqual(got, want) {
			t.Fatalf("plan depends on target order:\n%+v\n%+v", got, want)
		}
	}
}

func TestPlanRolloutDuplicates(t *testing.T) {
	ts := append(targets("a", "b"), Target{Name: "a", SkipReason: "second copy"})
	p := PlanRollout(ts, "r2", Policy{UpdateLimit: mustLimit(t, "5")})
	if !slices.Equal(p.Duplicates, []string{"a"}) || p.Intents["a"].Action != ActionApply || p.Eligible != 2 {
		t.Errorf("duplicates %q, intent of a %+v, eligible %d", p.Duplicates, p.Intents["a"], p.Eligible)
	}
	if !slices.Contains(p.Notes, "duplicate target a: ignored") {
		t.Errorf("no duplicate note in %q", p.Notes)
	}
}

func TestKnownInvalid(t *testing.T) {
	ts := targets("c", "a", "b")
	ts = with(ts, "c", func(t *Target) { t.Record.Invalid = map[string]string{"r2": "verify r2: deployment web not ready"} })
	ts = with(ts, "a", func(t *Target) { t.Record.Invalid = map[string]string{"r2": "timed out", "r1": "old"} })
	want := []Invalidity{{"a", "timed out"}, {"c", "verify r2: deployment web not ready"}}
	if got := KnownInvalid(ts, "r2"); !reflect.DeepEqual(got, want) {
		t.Errorf("KnownInvalid = %+v, want %+v", got, want)
	}
	if got := KnownInvalid(ts, "r3"); got != nil {
		t.Errorf("KnownInvalid(r3) = %+v", got)
	}
	p := PlanRollout(ts, "r2", Policy{UpdateLimit: mustLimit(t, "1")})
	if !reflect.DeepEqual(p.Invalid, want) || !slices.Contains(p.Notes, "r2 recorded invalid on a: timed out") {
		t.Errorf("plan Invalid %+v, notes %q", p.Invalid, p.Notes)
	}
}

func ExamplePlanRollout() {
	limit, _ := ParseLimit("50%")
	targets := []Target{
		{Name: "prod-us-1", Record: TargetRecord{Current: "4f1c2a"}},
		{Name: "prod-eu-1", Record: TargetRecord{Current: "4f1c2a"}},
		{Name: "prod-us-2", SkipReason: "control plane not initialized"},
		{Name: "prod-ap-1", Record: TargetRecord{Current: "4f1c2a"}},
		{Name: "prod-eu-2", Record: TargetRecord{Current: "4f1c2a", Provisioning: "9b7e01", Backup: "4f1c2a"}},
	}
	plan := PlanRollout(targets, "9b7e01", Policy{UpdateLimit: limit, Canary: []string{"prod-eu-1"}})
	for _, n := range plan.Notes {
		fmt.Println(n)
	}
	// Output:
	// 9b7e01 to 4 eligible of 5 targets: up to 2 at a time (update_limit 50%), tolerating 0 failures (max_failures 0)
	// resume prod-eu-2: interrupted while applying 9b7e01; applied again
	// wave 1/3 (canary): prod-eu-1
	// wave 2/3: prod-ap-1, prod-eu-2
	// wave 3/3: prod-us-1
	// skip prod-us-2: control plane not initialized
}

func TestPlanRolloutRepairsDrift(t *testing.T) {
	targets := []Target{
		{Name: "a", Record: TargetRecord{Current: "r2", Backup: "r1"}, Drifted: true},
		{Name: "b", Record: TargetRecord{Current: "r2", Backup: "r1"}},
	}
	p := PlanRollout(targets, "r2", Policy{UpdateLimit: UpdateLimitOf(5)})
	if in := p.Intents["a"]; in.Action != ActionApply || in.RestoreTo != "r1" || in.Wave != 1 {
		t.Fatalf("drifted target: %+v, want apply restoring to r1 in wave 1", in)
	}
	if in := p.Intents["b"]; in.Action != ActionAlreadyCurrent {
		t.Fatalf("settled target: %+v, want already-current", in)
	}
	if len(p.Waves) != 1 || len(p.Waves[0]) != 1 || p.Waves[0][0] != "a" {
		t.Fatalf("waves %v, want [[a]]", p.Waves)
	}
}

func TestFollowKeepsThePlannedWaves(t *testing.T) {
	p := Policy{UpdateLimit: mustLimit(t, "50%")}
	// Planned against a, b, c, d (two at a time); by apply, e joined, c became not ready and a
	// already runs the revision (another apply did it), so the fresh plan differs.
	planned := [][]string{{"a", "b"}, {"c", "d"}}
	ts := with(with(targets("a", "b", "c", "d", "e"),
		"a", func(t *Target) { t.Record.Current = "r2" }),
		"c", func(t *Target) { t.SkipReason = "not ready" })
	fresh := PlanRollout(ts, "r2", p)
	got := fresh.Follow(planned, p)
	if want := [][]string{{"b"}, {"d"}}; !reflect.DeepEqual(got.Waves, want) {
		t.Fatalf("waves %v, want %v", got.Waves, want)
	}
	if in := got.Intents["e"]; in.Action != ActionSkip || in.Wave != 0 {
		t.Errorf("e joined after the plan but is %+v", in)
	}
	if in := got.Intents["d"]; in.Action != ActionApply || in.Wave != 2 {
		t.Errorf("d: %+v", in)
	}
	wantDiff := []string{
		"planned a: now already-current; left out",
		"planned c: now skip: not ready; left out",
		"e: not in the plan being applied; left for the next apply",
	}
	if !reflect.DeepEqual(got.Differences, wantDiff) {
		t.Errorf("differences %q, want %q", got.Differences, wantDiff)
	}

	// A planned target marked drifted (to repair it) is applied even though it looks current.
	fresh = PlanRollout(MarkDriftedForTest(ts, "a"), "r2", p)
	got = fresh.Follow(planned, p)
	if want := [][]string{{"a", "b"}, {"d"}}; !reflect.DeepEqual(got.Waves, want) {
		t.Errorf("with a drifted: waves %v, want %v", got.Waves, want)
	}
}

// MarkDriftedForTest marks names drifted.
func MarkDriftedForTest(ts []Target, names ...string) []Target {
	out := slices.Clone(ts)
	for i := range out {
		if slices.Contains(names, out[i].Name) {
			out[i].Drifted = true
		}
	}
	return out
}

func TestPlanRefusedRevision(t *testing.T) {
	ts := with(with(with(targets("a", "b", "c", "d"),
		"a", func(t *Target) { t.Record.Current = "r2"; t.Drifted = true }),
		"b", func(t *Target) { t.Record.Provisioning = "r2" }),
		"c", func(t *Target) { t.Record.Provisioning = "r9" })
	for i := range ts {
		ts[i].Refused = "recorded invalid"
	}
	p := PlanRollout(ts, "r2", Policy{UpdateLimit: mustLimit(t, "1")})
	if len(p.Waves) != 0 {
		t.Errorf("a refused revision is applied in waves %v", p.Waves)
	}
	if want := []string{"b", "c"}; !reflect.DeepEqual(p.Resume, want) {
		t.Errorf("resume %v, want %v (in-flight targets restored)", p.Resume, want)
	}
	for name, want := range map[string]Action{"a": ActionAlreadyCurrent, "b": ActionRestore, "c": ActionRestore, "d": ActionSkip} {
		if got := p.Intents[name].Action; got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}
