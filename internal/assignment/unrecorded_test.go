package assignment

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestPlanHoldsUnrecorded: a module whose records are gone on a cluster while its objects are
// there is held back by the module's run (delivery.HoldUnrecorded); the assignment's plan must
// leave that cluster out of the module's waves too, from a fresh read and from the state, so
// that apply changes exactly what the plan showed. adopt = true written lifts the hold in both.
func TestPlanHoldsUnrecorded(t *testing.T) {
	for _, adopt := range []bool{false, true} {
		for _, fromState := range []bool{false, true} {
			name := map[bool]string{false: "held back", true: "adopted"}[adopt] + map[bool]string{false: ", fresh read", true: ", from state"}[fromState]
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { checkPlanHoldsUnrecorded(t, adopt, fromState) })
			})
		}
	}
}

// unrecordedFleet is c1..c3 on every module's older revision, c2's records of app gone while
// its objects are there (as delivery finds it: delivery.StateRecordsMissing).
func unrecordedFleet(t *testing.T, adopt bool) *fakeFleet {
	spec := worldSpec(t, Reconcile, worldPolicy(1, 0, engine.Rollback))
	spec.AdoptUnrecorded = adopt
	f := newFakeFleet(t, spec)
	for _, c := range []string{"c1", "c2", "c3"} {
		f.add(c)
		f.start(c, startOld)
	}
	st := f.clusters["c2"].mod("app")
	st.unrecorded, st.rec = true, engine.TargetRecord{Invalid: map[string]string{}}
	return f
}

func checkPlanHoldsUnrecorded(t *testing.T, adopt, fromState bool) {
	f := unrecordedFleet(t, adopt)
	q := fleet.Query{Namespace: f.spec.ClusterNamespace}
	// The plan, as Plan makes it (the fake's Observe finds records-missing as
	// delivery.Service.MarkUnrecorded does), from the fleet or from the refresh's status.
	obs, err := observe(context.Background(), f, q, f.spec, false)
	if err != nil {
		t.Fatal(err)
	}
	req := PlanRequest{Spec: f.spec}
	if fromState {
		refreshed, err := observe(context.Background(), f, q, f.spec, true)
		if err != nil {
			t.Fatal(err)
		}
		req.Prior, req.PriorSkipped = Status(refreshed, f.spec), refreshed.Skipped
	}
	p := decide(obs, req)
	if p.Refusing() {
		t.Fatalf("plan refused: %v", p.Refused)
	}
	inWaves := slices.Contains(slices.Concat(p.Waves["app"]...), "c2")
	reason, held := p.Plan.Held["app"]["c2"]
	switch {
	case !adopt && (inWaves || !held || !strings.HasPrefix(reason, "records missing: holds 1 object of this rollout")):
		t.Errorf("app waves %v, held %v (%q): want c2 left out, held back with the records-missing reason", p.Waves["app"], held, reason)
	case !adopt && !slices.ContainsFunc(p.Plan.Bindings["c2"], func(b PlannedBinding) bool {
		return b.Module == "app" && !b.Changes && b.Revision == "app-r1"
	}):
		t.Errorf("c2 planned bindings %+v: want app's old binding kept, unchanged", p.Plan.Bindings["c2"])
	case adopt && (!inWaves || held):
		t.Errorf("app waves %v, held %v: with adopt = true c2 gets app", p.Waves["app"], held)
	}
	if !slices.Contains(slices.Concat(p.Waves["crds"]...), "c2") {
		t.Errorf("crds waves %v: only app is held back on c2", p.Waves["crds"])
	}

	// Apply with what the plan showed: per module, it changes exactly the planned clusters.
	a := f.apply(RunRequest{Spec: f.spec, Query: q, Planned: p.Plan.Apply, PlannedKnown: true, Waves: p.Waves, Leaving: p.Leaving})
	if a.err != nil {
		t.Fatalf("apply: %v", a.err)
	}
	for _, m := range f.spec.Modules {
		var changed []string
		for _, o := range f.runOutcomes(m.Name) {
			if o.Status == engine.StatusSucceeded {
				changed = append(changed, o.Target)
			}
		}
		slices.Sort(changed)
		planned := slices.Sorted(slices.Values(slices.Concat(p.Waves[m.Name]...)))
		if !slices.Equal(changed, planned) {
			t.Errorf("module %s: apply changed %v, the plan's waves hold %v", m.Name, changed, planned)
		}
	}
	if b := a.bound("c2", "app"); !adopt && (b.Revision != "app-r1" || b.AppliedAt != seededAt) {
		t.Errorf("c2 app bound %+v: want its old binding as it was", b)
	}
	if got, want := a.bound("c2", "app").Result, records.BindingApplied; got != want {
		t.Errorf("c2 app bound %s, want %s", got, want)
	}
}
