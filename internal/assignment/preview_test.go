package assignment

import (
	"slices"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// planFleet: clusters a, b (bound to cni r1) and c (new) picked, old left the selector.
func planFleet(t *testing.T) (*Observation, Spec) {
	t.Helper()
	limit, err := engine.ParseLimit("2")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Key: records.Key{Kind: KeyKind, Namespace: "fleet", Name: "base"}, Mode: Reconcile, RecordNamespace: "gradual-system",
		Modules: []Module{{Name: "cni", Version: "2", Revision: "r2"}, {Name: "dns", Version: "1", Revision: "d1"}},
		Policy:  engine.Policy{UpdateLimit: limit}}
	bound := func(m, rev string) records.ModuleBinding {
		return records.ModuleBinding{Module: m, Revision: rev, Result: records.BindingApplied}
	}
	cni := &delivery.Observation{Clusters: map[string]delivery.ClusterState{
		"a": {Revision: "r1", State: delivery.StateCurrent}, "b": {Revision: "r1", State: delivery.StateCurrent}, "c": {State: delivery.StatePending}}}
	dns := &delivery.Observation{Clusters: map[string]delivery.ClusterState{
		"a": {Revision: "d1", State: delivery.StateCurrent}, "b": {Revision: "d1", State: delivery.StateCurrent}, "c": {State: delivery.StatePending}}}
	for _, n := range []string{"a", "b", "c"} {
		cni.Targets = append(cni.Targets, engine.Target{Name: n, Record: engine.TargetRecord{Current: cni.Clusters[n].Revision}})
		dns.Targets = append(dns.Targets, engine.Target{Name: n, Record: engine.TargetRecord{Current: dns.Clusters[n].Revision}})
	}
	obs := &Observation{Eligible: []string{"a", "b", "c"}, Skipped: map[string]string{},
		Bindings: map[string][]records.ModuleBinding{
			"a": {bound("cni", "r1"), bound("dns", "d1")}, "b": {bound("cni", "r1"), bound("dns", "d1")}, "old": {bound("cni", "r1")}},
		Modules: map[string]*delivery.Observation{"cni": cni, "dns": dns}, Leaving: []string{"old"}}
	return obs, spec
}

// TestDecide: what a plan of an assignment decides from what the fleet says, reading nothing.
func TestDecide(t *testing.T) {
	t.Run("fresh read: every cluster that needs a module, in waves; leaving waits for a plan from state", func(t *testing.T) {
		obs, spec := planFleet(t)
		p := decide(obs, PlanRequest{Spec: spec})
		if p.FromState || p.Refusing() {
			t.Fatalf("from state %v refusing %v", p.FromState, p.Refusing())
		}
		if got := p.Waves["cni"]; !slices.EqualFunc(got, [][]string{{"a", "b"}, {"c"}}, slices.Equal) {
			t.Errorf("cni waves %v, want [a b] [c]", got)
		}
		if got := p.Waves["dns"]; !slices.EqualFunc(got, [][]string{{"c"}}, slices.Equal) {
			t.Errorf("dns waves %v, want [c] (a and b run d1)", got)
		}
		if len(p.Leaving) != 0 || !slices.Equal(p.LeavingLater, []string{"old"}) {
			t.Errorf("leaving %v later %v: a fresh read lets go of nothing, and says old leaves later", p.Leaving, p.LeavingLater)
		}
	})
	t.Run("from the prior state: its clusters and its leaving, not the fleet's now", func(t *testing.T) {
		obs, spec := planFleet(t)
		prior := []ClusterStatus{
			{Name: "a", State: "ready", Modules: []ModuleStatus{
				{Module: "cni", Revision: "r2", State: delivery.StateCurrent, Result: records.BindingApplied},
				{Module: "dns", Revision: "d1", State: delivery.StateCurrent, Result: records.BindingApplied}}},
			{Name: "gone-since", State: StateLeaving},
		}
		p := decide(obs, PlanRequest{Spec: spec, Prior: prior, PriorSkipped: map[string]string{"c": "not ready"}})
		if !p.FromState || len(p.Waves) != 0 {
			t.Errorf("from state %v waves %v: a runs everything as the refresh read it", p.FromState, p.Waves)
		}
		if !slices.Equal(p.Leaving, []string{"gone-since"}) || !slices.Equal(p.LeavingLater, []string{"old"}) {
			t.Errorf("leaving %v later %v", p.Leaving, p.LeavingLater)
		}
	})
	t.Run("a module revision in the ledger, run nowhere: refused, naming the module", func(t *testing.T) {
		obs, spec := planFleet(t)
		obs.Modules["cni"].Ledger = []delivery.InvalidRevision{{Revision: "r2", Reason: "verify: calico not ready", Clusters: []string{"x"}}}
		p := decide(obs, PlanRequest{Spec: spec})
		if !p.Refusing() || len(p.Invalid) != 1 || p.Invalid[0].Index != 0 || p.Invalid[0].Kept {
			t.Fatalf("verdicts %+v", p.Invalid)
		}
		e, ok := usererr.As(p.Invalid[0].Err)
		if !ok || e.Summary != "Revision Recorded Invalid" || !strings.Contains(e.Detail, "module cni (version 2) of module-assignment fleet/base") {
			t.Fatalf("refusal %v", p.Invalid[0].Err)
		}
	})
	t.Run("in the ledger but running on a cluster: kept there, taken nowhere else", func(t *testing.T) {
		obs, spec := planFleet(t)
		obs.Modules["cni"].Ledger = []delivery.InvalidRevision{{Revision: "r2", Reason: "verify", Clusters: []string{"b"}}}
		obs.Modules["cni"].Targets[0].Record.Current = "r2"
		p := decide(obs, PlanRequest{Spec: spec})
		if p.Refusing() || len(p.Invalid) != 1 || !p.Invalid[0].Kept {
			t.Fatalf("verdicts %+v refusing %v", p.Invalid, p.Refusing())
		}
		if _, ok := p.Waves["cni"]; ok || len(p.Plan.Apply["cni"]) != 0 {
			t.Errorf("cni still planned: waves %v apply %v", p.Waves["cni"], p.Plan.Apply["cni"])
		}
		if len(p.Waves["dns"]) == 0 {
			t.Errorf("dns not planned")
		}
	})
}

func TestOnlyEligible(t *testing.T) {
	got := onlyEligible(map[string][]string{"cni": {"a", "b", "z"}, "dns": {"z"}}, []string{"a", "b", "c"})
	if len(got) != 1 || !slices.Equal(got["cni"], []string{"a", "b"}) {
		t.Fatalf("%v: want cni on a, b only", got)
	}
}

// What a module's dry-run covers: canary (the default) its canary waves or its first wave, all every cluster it
// changes, none nothing; the warning gives each module's findings, and Flux's skip once.
func TestPreviewTargetsAndText(t *testing.T) {
	waves := [][]string{{"a"}, {"b", "c"}}
	changing := []string{"a", "b", "c"}
	for mode, want := range map[string][]string{"": {"a"}, delivery.PreviewCanary: {"a"}, delivery.PreviewAll: changing, delivery.PreviewNone: nil} {
		if got := PreviewTargets(mode, waves, nil, changing); !slices.Equal(got, want) {
			t.Errorf("preview %q: %v, want %v", mode, got, want)
		}
	}
	// Canaries in waves of their own: every canary wave, not the first alone.
	canaryWaves := [][]string{{"a"}, {"b"}, {"c", "d"}}
	if got := PreviewTargets(delivery.PreviewCanary, canaryWaves, []string{"a", "b"}, []string{"a", "b", "c", "d"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("canary waves [a] [b]: %v, want a, b", got)
	}
	cni := &delivery.Preview{Label: "module cni", Mode: delivery.PreviewCanary, Clusters: map[string]delivery.ClusterPreview{"a": {NotPreviewed: "the preview's time budget ran out"}}}
	text := PreviewText([]*delivery.Preview{cni})
	if !strings.HasPrefix(text, "module cni: Server-side dry-run") || !strings.Contains(text, "Not previewed, 1 clusters") {
		t.Errorf("text:\n%s", text)
	}
	flux := func(label string) *delivery.Preview {
		return &delivery.Preview{Label: label, Mode: delivery.PreviewCanary, Skipped: "delivery through Flux asks no workload cluster at plan time"}
	}
	if text := PreviewText([]*delivery.Preview{flux("module cni"), flux("module dns")}); strings.Count(text, "No cluster was dry-run") != 1 {
		t.Errorf("Flux: %q, want the skip said once", text)
	}
}
