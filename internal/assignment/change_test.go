package assignment

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// The change attributes an assignment shares with rollouts (canary, canary_optional,
// on_failure, force_conflicts, retry_invalid): what each module's delivery gets, and how a plan
// and an apply of the assignment judge canaries and the invalid ledger.

func TestModuleSpecCarriesTheChangeAttributes(t *testing.T) {
	spec := Spec{Key: records.Key{Kind: KeyKind, Namespace: "fleet", Name: "base"}, ForceConflicts: true, Retry: true,
		Policy: engine.Policy{OnFailure: engine.Rollback, Canary: []string{"c1"}}}
	got := spec.moduleSpec(Module{Name: "cni", Revision: "r2"})
	if !got.ForceConflicts || !got.Retry || got.Policy.OnFailure != engine.Rollback || !slices.Equal(got.Policy.Canary, []string{"c1"}) {
		t.Errorf("module spec %+v: want force_conflicts, retry_invalid, on_failure and canary passed on", got)
	}
	// The assignment judges canary gaps itself, over every cluster it picks; the module's run sees
	// only the clusters it changes and must not refuse a canary that has the module already.
	if !got.Policy.CanaryOptional || spec.Policy.CanaryOptional {
		t.Errorf("canary_optional: module %v, assignment %v; want the module's run never to refuse, the assignment's unchanged",
			got.Policy.CanaryOptional, spec.Policy.CanaryOptional)
	}
}

func TestCanaryGaps(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "cni", Revision: "r2"}, {Name: "dns", Revision: "d1"}},
		Policy: engine.Policy{UpdateLimit: engine.UpdateLimitOf(2)}}
	obs := &Observation{Eligible: []string{"a", "b", "c"}, Skipped: map[string]string{"s": "control plane not initialized"}}
	// cni goes to a and c; dns to c only (a and b have it).
	plan := BindingPlan{Apply: map[string][]string{"cni": {"a", "c"}, "dns": {"c"}}}
	for _, tc := range []struct {
		name     string
		canary   []string
		optional bool
		want     string // module: canary reason; ...
	}{
		{"a canary that gets every module", []string{"c"}, false, ""},
		{"a canary that has a module already counts as done for it", []string{"a"}, false, ""},
		{"a canary with nothing to change", []string{"b"}, false, ""},
		{"a skipped canary is a gap for every module with waves", []string{"s"}, false,
			"cni: s: skip: control plane not initialized; dns: s: skip: control plane not initialized"},
		{"a canary not picked", []string{"a", "zz"}, false,
			"cni: zz: not a cluster this rollout picks (no such Cluster, or the selector does not match it); dns: zz: not a cluster this rollout picks (no such Cluster, or the selector does not match it)"},
		{"canary_optional lets the gaps go", []string{"s"}, true, ""},
		{"no canary", nil, false, ""},
	} {
		s := spec
		s.Policy.Canary, s.Policy.CanaryOptional = tc.canary, tc.optional
		var got []string
		for _, g := range CanaryGaps(obs, plan, s) {
			for _, gap := range g.Gaps {
				got = append(got, g.Module+": "+gap.Name+": "+gap.Reason)
			}
		}
		if strings.Join(got, "; ") != tc.want {
			t.Errorf("%s: gaps %q, want %q", tc.name, strings.Join(got, "; "), tc.want)
		}
	}
}

func TestCanaryWavesAndWavesOrder(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "cni", Revision: "r2"}}, Policy: engine.Policy{UpdateLimit: engine.UpdateLimitOf(2), Canary: []string{"d", "c"}}}
	waves := Waves(BindingPlan{Apply: map[string][]string{"cni": {"a", "b", "c", "d", "e"}}}, spec)["cni"]
	if want := [][]string{{"d", "c"}, {"a", "b"}, {"e"}}; !slices.EqualFunc(waves, want, slices.Equal) {
		t.Fatalf("waves %v, want the canaries first in their own wave, in the order given: %v", waves, want)
	}
	if n := CanaryWaves(waves, spec.Policy.Canary); n != 1 {
		t.Errorf("CanaryWaves = %d, want 1", n)
	}
	if n := CanaryWaves([][]string{{"a"}, {"d"}}, spec.Policy.Canary); n != 0 {
		t.Errorf("CanaryWaves of waves that do not start with a canary = %d, want 0", n)
	}
}

func TestPreviewCanaryAndRetry(t *testing.T) {
	t.Run("a canary that cannot go first refuses the plan on canary, naming the module", func(t *testing.T) {
		obs, spec := planFleet(t)
		obs.Eligible = []string{"a", "b"}
		obs.Skipped = map[string]string{"c": "not ready"}
		spec.Policy.Canary = []string{"c"}
		p := decide(obs, PlanRequest{Spec: spec})
		if p.Refused == nil || p.Refused.Attribute != "canary" {
			t.Fatalf("refused %+v, want refused on canary", p.Refused)
		}
		e, ok := usererr.As(p.Refused.Err)
		if !ok || e.Summary != "Canary Not In The First Wave" || !strings.Contains(e.Detail, "Module cni: ") || !strings.Contains(e.Detail, "c: skip: not ready") {
			t.Errorf("refusal %v", p.Refused.Err)
		}
		spec.Policy.CanaryOptional = true
		if p := decide(obs, PlanRequest{Spec: spec}); p.Refused != nil {
			t.Errorf("canary_optional still refused: %v", p.Refused.Err)
		}
	})
	t.Run("retry_invalid plans a revision the ledger holds", func(t *testing.T) {
		obs, spec := planFleet(t)
		obs.Modules["cni"].Ledger = []delivery.InvalidRevision{{Revision: "r2", Reason: "verify", Clusters: []string{"x"}}}
		p := decide(obs, PlanRequest{Spec: spec})
		e, ok := usererr.As(p.Invalid[0].Err)
		if !p.Refusing() || !ok || !strings.Contains(e.Detail, "retry_invalid = true") {
			t.Fatalf("without retry_invalid: refusing %v, %v; want refused, pointing at retry_invalid", p.Refusing(), p.Invalid)
		}
		spec.Retry = true
		p = decide(obs, PlanRequest{Spec: spec})
		if p.Refusing() || len(p.Invalid) != 0 || len(p.Waves["cni"]) == 0 {
			t.Errorf("with retry_invalid: refusing %v verdicts %v waves %v; want cni planned", p.Refusing(), p.Invalid, p.Waves["cni"])
		}
	})
}

// At apply, the canaries are judged again on the fleet as it reads then: one that became
// unavailable since the plan refuses the run before anything is written; one that has the
// module already does not.
func TestWorldCanaries(t *testing.T) {
	withCanary := func(p engine.Policy, optional bool, canary ...string) engine.Policy {
		p.Canary, p.CanaryOptional = canary, optional
		return p
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFleet(t, worldSpec(t, Reconcile, withCanary(worldPolicy(1, 0, engine.Rollback), false, "c3")))
		f.add("c1")
		f.add("c2")
		f.add("c3")
		a := f.apply(f.plan())
		if a.err != nil {
			t.Fatalf("run: %v", a.err)
		}
		for _, rc := range f.runs {
			if first := rc.res.Outcomes; len(first) == 0 || !slices.ContainsFunc(first, func(o engine.Outcome) bool { return o.Target == "c3" && o.Wave == 1 }) {
				t.Errorf("module %s: c3 not in wave 1: %+v", rc.module, rc.res.Outcomes)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFleet(t, worldSpec(t, Reconcile, withCanary(worldPolicy(1, 0, engine.Rollback), false, "c2")))
		f.add("c1")
		f.add("c2")
		req := f.plan()
		f.clusters["c2"].skip = "control plane not initialized" // after the plan
		a := f.applyUnchecked(req)
		if ue, ok := usererr.As(a.err); !ok || ue.Summary != "Canary Not Available" || !strings.Contains(ue.Detail, "c2: skip: control plane not initialized") {
			t.Fatalf("err %v, want the run refused for its canary", a.err)
		}
		if len(f.runs) != 0 || len(a.after) != 0 {
			t.Errorf("a refused run delivered %s and bound %v", f.runsOn(), a.after)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFleet(t, worldSpec(t, Reconcile, withCanary(worldPolicy(1, 0, engine.Rollback), false, "c2")))
		f.add("c1")
		f.add("c2")
		for _, m := range []string{"crds", "app", "mon"} {
			f.seed("c2", m, m+"-r2") // the canary has every module already
		}
		a := f.apply(f.plan())
		if a.err != nil || f.runsOn() != "crds:c1 app:c1 mon:c1" {
			t.Errorf("err %v, delivered %s: a canary that has the modules counts as done", a.err, f.runsOn())
		}
	})
}

// on_failure per module: past max_failures, rollback restores the clusters the module's run had
// changed too, and its dependents are blocked there; halt keeps the module where it succeeded.
func TestWorldOnFailure(t *testing.T) {
	for _, tc := range []struct {
		onFailure engine.OnFailure
		c1        records.BindingResult // crds binding on c1, which succeeded before c2 failed
	}{{engine.Rollback, records.BindingFailed}, {engine.Halt, records.BindingApplied}} {
		synctest.Test(t, func(t *testing.T) {
			f := newFakeFleet(t, worldSpec(t, Reconcile, worldPolicy(1, 0, tc.onFailure)))
			f.add("c1")
			f.add("c2").faults["crds"] = modFaults{verifyFails: true}
			a := f.apply(f.plan())
			if a.err == nil {
				t.Fatalf("%s: a failure past max_failures did not fail the run", tc.onFailure)
			}
			wantBinding(t, a, "c1", "crds", tc.c1, "")
			if st := f.clusters["c1"].mods["crds"]; (st.actual == "crds-r2") != (tc.onFailure == engine.Halt) {
				t.Errorf("%s: c1 runs crds %q", tc.onFailure, st.actual)
			}
			if tc.onFailure == engine.Rollback {
				wantBinding(t, a, "c1", "app", records.BindingBlocked, "depends on module crds, which is failed")
			}
		})
	}
}
