package fleetupdate

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// planThenApply plans spec from the fleet's refreshed facts, lets change alter the fleet, then
// applies the planned waves with the plan's preview.
func planThenApply(t *testing.T, f *fakeFleet, spec Spec, change func()) (*PlanResult, *ApplyResult, error) {
	t.Helper()
	ctx := context.Background()
	planned, err := f.service().Plan(ctx, spec, f.priorOf())
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if change != nil {
		change()
	}
	res, err := f.service().Apply(ctx, ApplyRequest{Spec: spec, Planned: planned.Plan.Waves, Strategies: planned.Strategies})
	return planned, res, err
}

// Every cluster is written in the wave the plan gave it, at most update_limit at a time.
func TestApplyWritesEachClusterInItsPlannedWave(t *testing.T) {
	f := newFakeFleet("a", "b", "c", "d", "e")
	planned, res, err := planThenApply(t, f, specOf("2", "0", "c"), nil)
	if err != nil || res.Err() != nil {
		t.Fatalf("apply: %v / %v", err, res.Err())
	}
	want := [][]string{{"c"}, {"a", "b"}, {"d", "e"}}
	if !slices.EqualFunc(planned.Plan.Waves, want, slices.Equal) {
		t.Fatalf("planned waves %v, want %v", planned.Plan.Waves, want)
	}
	got := f.writes()
	pos := map[string]int{}
	for i, c := range got {
		pos[c] = i
	}
	if len(got) != 5 || pos["c"] != 0 || max(pos["a"], pos["b"]) > min(pos["d"], pos["e"]) {
		t.Fatalf("written %v: not wave by wave %v", got, want)
	}
	if f.maxInFlight > 2 {
		t.Fatalf("%d clusters written at once, update_limit 2", f.maxInFlight)
	}
}

// A cluster relabelled out of the selector after the plan is left alone and reported; a
// cluster that joined after the plan is not touched either.
func TestApplyLeavesClustersTheyPlanDidNotShow(t *testing.T) {
	f := newFakeFleet("a", "b", "c")
	_, res, err := planThenApply(t, f, specOf("1", "0"), func() {
		f.picked["b"] = false
		f.clusters["z"], f.picked["z"] = []string{"z-m1"}, true
	})
	if err != nil || res.Err() != nil {
		t.Fatalf("apply: %v / %v", err, res.Err())
	}
	if got := f.writes(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("written %v, want [a c]", got)
	}
	diffs := strings.Join(res.Differences, "\n")
	if !strings.Contains(diffs, "planned b: no longer picked; left out") || !strings.Contains(diffs, "z: not in the plan being applied") {
		t.Fatalf("differences do not name b and z:\n%s", diffs)
	}
}

// More than max_failures failed clusters stop the next wave.
func TestApplyRespectsTheFailureBudget(t *testing.T) {
	f := newFakeFleet("a", "b", "c", "d")
	f.failing["a"] = true
	_, res, err := planThenApply(t, f, specOf("1", "0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("written %v after a failure with max_failures 0, want [a]", got)
	}
	if res.Err() == nil || !res.Result.Aborted {
		t.Fatalf("a failure beyond the budget does not fail the apply: %+v", res.Result)
	}
	f2 := newFakeFleet("a", "b", "c", "d")
	f2.failing["a"] = true
	_, _, _ = planThenApply(t, f2, specOf("1", "1"), nil)
	if got := f2.writes(); len(got) != 4 {
		t.Fatalf("written %v with one failure within max_failures 1, want all four", got)
	}
}

// An extension that vanishes after the first wave stops the second wave before anything of it
// is written: with fallback "none" no machine is replaced (the fake panics on such a write).
func TestApplyStopsTheWaveWhoseExtensionVanished(t *testing.T) {
	f := newFakeFleet("a", "b", "c")
	f.afterApply = func(f *fakeFleet, cluster string) {
		if cluster == "a" {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, n := range []string{"b", "c"} {
				for _, m := range f.clusters[n] {
					f.strategy[m] = inplace.StrategyRolling // no extension answers any more
				}
			}
		}
	}
	_, res, err := planThenApply(t, f, specOf("1", "0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("written %v, want only the first wave [a]", got)
	}
	if res.Err() == nil || !strings.Contains(res.Stopped, "wave 2 not started") || !strings.Contains(res.Stopped, "machine b/b-m1: planned in-place, now blocked") {
		t.Fatalf("the stop does not name the wave and the difference: %q", res.Stopped)
	}
	if o, _ := res.Result.Outcome("c"); o.Status != engine.StatusSkipped {
		t.Fatalf("cluster c after the stop: %s, want skipped", o.Status)
	}
}

// With fallback "rolling" too, a machine planned in place that would now be replaced stops its
// wave: apply does not replace machines the plan showed updated in place.
func TestApplyStopsWhenAMachinePlannedInPlaceWouldBeReplaced(t *testing.T) {
	f := newFakeFleet("a", "b")
	spec := specOf("1", "0")
	spec.Fallback = inplace.FallbackRolling
	_, res, err := planThenApply(t, f, spec, func() { f.strategy["a-m2"] = inplace.StrategyRolling })
	if res != nil || err == nil {
		t.Fatalf("apply went ahead: %+v", res)
	}
	if e, ok := usererr.As(err); !ok || !strings.Contains(e.Detail, "machine a/a-m2: planned in-place, now rolling") {
		t.Fatalf("refusal does not name the machine: %v", err)
	}
	if got := f.writes(); len(got) != 0 {
		t.Fatalf("written %v after the preview changed", got)
	}
}

// A cluster an earlier apply wrote but did not see through is applied again (resumed); one
// settled on the revision is current and not touched.
func TestPlanResumesAndSkipsCurrent(t *testing.T) {
	f := newFakeFleet("a", "b", "c")
	spec := specOf("1", "0")
	rev := spec.Revision()
	prior := &Prior{Revision: rev, Clusters: map[string]ClusterFacts{"a": {Recorded: rev, Settled: true}, "b": {Recorded: rev}, "c": {Skip: "paused"}}}
	p, err := f.service().Plan(context.Background(), spec, prior)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(p.Plan.Waves, [][]string{{"b"}}, slices.Equal) || p.Plan.Intents["a"].Action != engine.ActionAlreadyCurrent ||
		p.Plan.Intents["b"].Provisioning != rev || p.Skipped["c"] != "paused" {
		t.Fatalf("plan from the state: waves %v intents %+v skipped %v", p.Plan.Waves, p.Plan.Intents, p.Skipped)
	}
}

// The waves planned from the state do not depend on the live fleet: planning again after the
// fleet changed gives the same waves (what Terraform checks when it plans again at apply).
func TestPlanFromStateIgnoresLiveChanges(t *testing.T) {
	f := newFakeFleet("a", "b", "c")
	spec := specOf("1", "0")
	prior := f.priorOf()
	first, err := f.service().Plan(context.Background(), spec, prior)
	if err != nil {
		t.Fatal(err)
	}
	f.picked["b"] = false
	delete(f.clusters, "c")
	again, err := f.service().Plan(context.Background(), spec, prior)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(first.Plan.Waves, again.Plan.Waves, slices.Equal) {
		t.Fatalf("waves changed with the live fleet: %v then %v", first.Plan.Waves, again.Plan.Waves)
	}
}

// A canary that cannot be in the first wave refuses the plan (as the rollout does).
func TestPlanRefusesCanaryGaps(t *testing.T) {
	f := newFakeFleet("a", "b")
	_, err := f.service().Plan(context.Background(), specOf("1", "0", "nope"), f.priorOf())
	if e, ok := usererr.As(err); !ok || e.Summary != "Canary Not In The First Wave" || !strings.Contains(e.Detail, "nope") {
		t.Fatalf("canary gap not refused: %v", err)
	}
}
