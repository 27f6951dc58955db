package assignment

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The outcomes TestBindingFor leaves out: every status the engine can end a target on maps to
// applied, failed or unchanged, and the time is the injected clock's, in UTC, to the second.
func TestBindingForEveryStatus(t *testing.T) {
	m := Module{Name: "dns", Revision: "r2"}
	now := time.Date(2026, 2, 28, 23, 59, 59, 999_999_999, time.FixedZone("PST", -8*3600))
	stamp := time.Date(2026, 3, 1, 7, 59, 59, 0, time.UTC)
	failedBefore := records.ModuleBinding{Module: "dns", Revision: "r2", Result: records.BindingFailed, Reason: "old"}
	blocked := records.ModuleBinding{Module: "dns", Revision: "r2", Result: records.BindingBlocked, Reason: "depends on module crds"}
	for _, tc := range []struct {
		status engine.Status
		prev   records.ModuleBinding
		bound  bool
		want   records.BindingResult // result written, "" = left as it was
	}{
		{engine.StatusSucceeded, records.ModuleBinding{}, false, records.BindingApplied},
		{engine.StatusAlreadyCurrent, failedBefore, true, records.BindingApplied}, // failed on it before, runs it now
		{engine.StatusAlreadyCurrent, blocked, true, records.BindingApplied},
		{engine.StatusRolledBack, failedBefore, true, records.BindingFailed},
		{engine.StatusCancelled, records.ModuleBinding{}, false, records.BindingFailed},
		{engine.StatusUnsettled, records.ModuleBinding{}, false, records.BindingFailed},
		{engine.StatusSkipped, blocked, true, ""},
		{engine.StatusNotStarted, records.ModuleBinding{}, false, ""},
	} {
		got, changed := BindingFor(engine.Outcome{Target: "c1", Status: tc.status, Error: "why"}, m, tc.prev, tc.bound, now)
		switch {
		case tc.want == "":
			if changed || !reflect.DeepEqual(got, tc.prev) {
				t.Errorf("%s: %+v changed=%v, want %+v unchanged", tc.status, got, changed, tc.prev)
			}
		case !changed || got.Result != tc.want || got.Module != "dns" || got.Revision != "r2":
			t.Errorf("%s: %+v changed=%v, want %s on r2", tc.status, got, changed, tc.want)
		case tc.want == records.BindingApplied && (!got.AppliedAt.Equal(stamp) || got.AppliedAt.Location() != time.UTC || got.Reason != ""):
			t.Errorf("%s: applied at %v reason %q, want %v UTC and no reason", tc.status, got.AppliedAt, got.Reason, stamp)
		case tc.want == records.BindingFailed && (got.Reason != "why" || !got.AppliedAt.IsZero()):
			t.Errorf("%s: failed %+v, want the outcome's error and no time", tc.status, got)
		}
	}
}

func TestCandidatesEdges(t *testing.T) {
	two := Spec{Modules: []Module{{Name: "a"}, {Name: "b"}}}
	for _, tc := range []struct {
		name         string
		spec         Spec
		eligible     []string
		apply        map[string][]string
		planned      map[string][]string
		plannedKnown bool
		want         map[string][]string
	}{
		{"nothing eligible, nothing planned", two, nil, nil, nil, false, map[string][]string{"a": nil, "b": nil}},
		{"a module the plan left out goes nowhere", two, []string{"c1"}, map[string][]string{"a": {"c1"}, "b": {"c1"}},
			map[string][]string{"a": {"c1"}}, true, map[string][]string{"a": {"c1"}, "b": nil}},
		{"with a plan, Reconcile goes only where the plan said", Spec{Mode: Reconcile, Modules: two.Modules}, []string{"c1", "c2"}, nil,
			map[string][]string{"a": {"c2"}, "b": {}}, true, map[string][]string{"a": {"c2"}, "b": nil}},
		{"a planned cluster no longer eligible waits", two, []string{"c2"}, nil,
			map[string][]string{"a": {"c1", "c2"}, "b": {"c1"}}, true, map[string][]string{"a": {"c2"}, "b": nil}},
		{"without a plan, Reconcile takes every eligible cluster even if none needs it", Spec{Mode: Reconcile, Modules: two.Modules},
			[]string{"c1"}, map[string][]string{}, nil, false, map[string][]string{"a": {"c1"}, "b": {"c1"}}},
	} {
		got := Candidates(tc.spec, &Observation{Eligible: tc.eligible}, BindingPlan{Apply: tc.apply}, tc.planned, tc.plannedKnown)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBlockedBy(t *testing.T) {
	m := Module{Name: "app", DependsOn: []string{"crds", "ns"}}
	applied := records.ModuleBinding{Result: records.BindingApplied}
	for _, tc := range []struct {
		name     string
		bound    map[string]records.ModuleBinding
		dep, why string
	}{
		{"all applied", map[string]records.ModuleBinding{"crds": applied, "ns": applied}, "", ""},
		{"first missing", map[string]records.ModuleBinding{"ns": applied}, "crds", "not applied"},
		{"second failed", map[string]records.ModuleBinding{"crds": applied, "ns": {Result: records.BindingFailed}}, "ns", "failed"},
		{"blocked counts as not applied", map[string]records.ModuleBinding{"crds": {Result: records.BindingBlocked}, "ns": applied}, "crds", "blocked"},
		{"nil map", nil, "crds", "not applied"},
	} {
		if dep, why := blockedBy(tc.bound, m); dep != tc.dep || why != tc.why {
			t.Errorf("%s: %q %q, want %q %q", tc.name, dep, why, tc.dep, tc.why)
		}
	}
	if dep, _ := blockedBy(nil, Module{Name: "free"}); dep != "" {
		t.Errorf("a module without dependencies is blocked by %q", dep)
	}
}

func TestBindingOrderAndOnlyConfigured(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "crds"}, {Name: "app"}, {Name: "mon"}}}
	bound := []records.ModuleBinding{{Module: "zeta"}, {Module: "mon"}, {Module: "alpha"}, {Module: "crds"}}
	if got := bindingOrder(spec, bound); !reflect.DeepEqual(got, []string{"crds", "mon", "alpha", "zeta"}) {
		t.Errorf("bindingOrder = %v: want configured order, then the unconfigured sorted", got)
	}
	if got := bindingOrder(spec, nil); got != nil {
		t.Errorf("bindingOrder of nothing = %v", got)
	}
	in := map[string][]records.ModuleBinding{
		"c1": {{Module: "app"}, {Module: "legacy"}},
		"c2": {{Module: "legacy"}},
	}
	if got := onlyConfigured(in, spec); !reflect.DeepEqual(got, map[string][]records.ModuleBinding{"c1": {{Module: "app"}}}) {
		t.Errorf("onlyConfigured = %v: want c2 (only unconfigured) dropped", got)
	}
}

func TestWithDependencies(t *testing.T) {
	obj := func(name string) *manifest.Set {
		set, err := manifest.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: demo}\n")
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	// A diamond: app depends on crds and ns, both on base; each object once, dependencies first.
	spec := Spec{Modules: []Module{
		{Name: "base", Objects: obj("base")},
		{Name: "crds", Objects: obj("crds"), DependsOn: []string{"base"}},
		{Name: "ns", Objects: obj("ns"), DependsOn: []string{"base"}},
		{Name: "app", Objects: obj("app"), DependsOn: []string{"crds", "ns", "gone"}},
	}}
	var got []string
	for _, o := range withDependencies(spec, spec.Modules[3], func(m Module) []*unstructured.Unstructured { return m.Objects.Objects }).Objects {
		got = append(got, o.GetName())
	}
	if strings.Join(got, ",") != "base,crds,ns,app" {
		t.Errorf("objects %v, want base,crds,ns,app", got)
	}
	if n := len(withDependencies(spec, spec.Modules[0], func(m Module) []*unstructured.Unstructured { return m.Objects.Objects }).Objects); n != 1 {
		t.Errorf("base alone has %d objects", n)
	}
}

func TestOnlyInEdges(t *testing.T) {
	for _, tc := range []struct {
		waves [][]string
		keep  []string
		want  [][]string
	}{
		{nil, []string{"a"}, [][]string{}},
		{[][]string{{"a", "b"}}, nil, [][]string{}},
		{[][]string{{"a", "b"}, {"c", "d"}}, []string{"d", "b", "a"}, [][]string{{"a", "b"}, {"d"}}},
	} {
		if got := onlyIn(tc.waves, tc.keep); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("onlyIn(%v, %v) = %#v, want %#v", tc.waves, tc.keep, got, tc.want)
		}
	}
}

func TestPlanChangesAndKeptOldWarning(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    BindingPlan
		want bool
	}{
		{"nothing", BindingPlan{Apply: map[string][]string{}, Removed: map[string][]string{}}, false},
		{"apply", BindingPlan{Apply: map[string][]string{"a": {"c1"}}}, true},
		{"removed", BindingPlan{Removed: map[string][]string{"old": {"c1"}}}, true},
		{"leaving", BindingPlan{Leaving: []string{"c9"}}, true},
		{"gone", BindingPlan{Gone: []string{"c9"}}, true},
	} {
		if got := tc.p.Changes(); got != tc.want {
			t.Errorf("%s: Changes = %v", tc.name, got)
		}
	}
	spec := Spec{Modules: []Module{{Name: "b", Version: "2.0", Revision: "rb"}, {Name: "a", Version: "1.1", Revision: "ra"}}}
	if got := KeptOldWarning(BindingPlan{KeptOld: map[string][]string{}}, spec); got != "" {
		t.Errorf("warning without kept clusters: %q", got)
	}
	got := KeptOldWarning(BindingPlan{KeptOld: map[string][]string{"b": {"c1", "c2"}, "a": {"c3"}}}, spec)
	ia, ib := strings.Index(got, "module a (version 1.1, revision ra): 1 cluster(s)"), strings.Index(got, "module b (version 2.0, revision rb): 2 cluster(s)")
	if ia < 0 || ib < ia || !strings.HasSuffix(got, `Use mode = "Reconcile" to update them in verified waves.`) {
		t.Errorf("warning:\n%s", got)
	}
}

// PlanAssignment in Reconcile: a cluster is kept only when bound applied on the revision and
// its records say current on it.
func TestPlanAssignmentReconcileKeeps(t *testing.T) {
	spec := Spec{Mode: Reconcile, Modules: []Module{{Name: "m", Revision: "r2"}}}
	applied := records.ModuleBinding{Module: "m", Revision: "r2", Result: records.BindingApplied}
	for _, tc := range []struct {
		name  string
		bound []records.ModuleBinding
		state delivery.ClusterState
		apply bool
	}{
		{"bound and current", []records.ModuleBinding{applied}, delivery.ClusterState{State: delivery.StateCurrent, Revision: "r2"}, false},
		{"bound, records on another revision", []records.ModuleBinding{applied}, delivery.ClusterState{State: delivery.StateCurrent, Revision: "r1"}, true},
		{"bound, records provisioning", []records.ModuleBinding{applied}, delivery.ClusterState{State: delivery.StateProvisioning, Revision: "r2"}, true},
		{"bound, drifted", []records.ModuleBinding{applied}, delivery.ClusterState{State: delivery.StateDrifted, Revision: "r2"}, true},
		{"current, not bound (imported)", nil, delivery.ClusterState{State: delivery.StateCurrent, Revision: "r2"}, true},
		{"current, bound blocked", []records.ModuleBinding{{Module: "m", Revision: "r2", Result: records.BindingBlocked}},
			delivery.ClusterState{State: delivery.StateCurrent, Revision: "r2"}, true},
	} {
		obs := &Observation{Eligible: []string{"c1"}, Bindings: map[string][]records.ModuleBinding{"c1": tc.bound},
			Modules: map[string]*delivery.Observation{"m": {Clusters: map[string]delivery.ClusterState{"c1": tc.state}}}}
		p := PlanAssignment(obs, spec, nil)
		if got := len(p.Apply["m"]) == 1; got != tc.apply {
			t.Errorf("%s: applies %v, want %v", tc.name, got, tc.apply)
		}
		if b := p.Bindings["c1"]; len(b) != 1 || b[0].Changes != tc.apply || tc.apply && (b[0].Revision != "r2" || b[0].Result != records.BindingApplied) {
			t.Errorf("%s: planned bindings %+v", tc.name, b)
		}
	}
}

// judge: a cluster's state is its worst module's, with one clause per module not fine.
func TestJudge(t *testing.T) {
	spec := Spec{Mode: Reconcile, Modules: []Module{{Name: "a", Revision: "ra2"}, {Name: "b", Revision: "rb2"}}}
	applied := func(mod, rev string, state delivery.State, drift ...string) ModuleStatus {
		return ModuleStatus{Module: mod, Revision: rev, Result: records.BindingApplied, State: state, Drift: drift}
	}
	for _, tc := range []struct {
		name       string
		spec       Spec
		mods       []ModuleStatus
		state      State
		wantDetail string
	}{
		{"all current", spec, []ModuleStatus{applied("a", "ra2", "current"), applied("b", "rb2", "current")}, StateCurrent, ""},
		{"nothing bound", spec, []ModuleStatus{{Module: "a"}, {Module: "b"}}, StateJoining, "joining: no module applied yet"},
		{"no modules", spec, nil, StateCurrent, ""},
		{"one not applied yet", spec, []ModuleStatus{applied("a", "ra2", "current"), {Module: "b"}}, StateOutdated, "outdated: module b not applied yet"},
		{"outdated in Reconcile", spec, []ModuleStatus{applied("a", "ra1", "current"), applied("b", "rb2", "current")}, StateOutdated,
			"outdated: module a runs revision ra1, not ra2"},
		{"kept in ApplyOnce, no note", Spec{Mode: ApplyOnce, Modules: spec.Modules}, []ModuleStatus{applied("a", "ra1", "current"), applied("b", "rb2", "current")},
			StateKept, ""},
		{"provisioning beats outdated", spec, []ModuleStatus{applied("a", "ra1", "current"), applied("b", "rb2", delivery.StateProvisioning)}, StateProvisioning,
			"provisioning: module a runs revision ra1, not ra2; module b interrupted: an apply stopped while changing it"},
		{"drift without detail", spec, []ModuleStatus{applied("a", "ra2", delivery.StateDrifted), applied("b", "rb2", "current")}, StateDrifted,
			"drifted: module a drifted: objects missing or edited"},
		{"drift beyond five is counted", spec, []ModuleStatus{applied("a", "ra2", delivery.StateDrifted, "o1", "o2", "o3", "o4", "o5", "o6", "o7"), applied("b", "rb2", "current")},
			StateDrifted, "drifted: module a drifted: o1, o2, o3, o4, o5, and 2 more"},
		{"failed is worst", spec, []ModuleStatus{{Module: "a", Revision: "ra2", Result: records.BindingFailed, Reason: "boom"},
			{Module: "b", Revision: "rb2", Result: records.BindingBlocked, Reason: "depends on module a, which is failed"}},
			StateFailed, "failed: module a failed on revision ra2: boom; module b blocked: depends on module a, which is failed"},
	} {
		state, detail := judge(tc.mods, tc.spec)
		if state != tc.state || detail != tc.wantDetail {
			t.Errorf("%s: %q %q, want %q %q", tc.name, state, detail, tc.state, tc.wantDetail)
		}
	}
}

func TestStatusOrphanLeavingAndSummarize(t *testing.T) {
	spec := Spec{Orphan: true, Modules: []Module{{Name: "a", Revision: "r"}}}
	obs := &Observation{Eligible: []string{"b-ok"}, Skipped: map[string]string{"a-down": "paused"}, Leaving: []string{"c-left"},
		Bindings: map[string][]records.ModuleBinding{"b-ok": {{Module: "a", Revision: "r", Result: records.BindingApplied}}},
		Modules:  map[string]*delivery.Observation{"a": {Clusters: map[string]delivery.ClusterState{"b-ok": {State: delivery.StateCurrent, Revision: "r", Drift: []string{"z", "y"}}}}}}
	status := Status(obs, spec)
	var names []string
	for _, cs := range status {
		names = append(names, cs.Name+"="+string(cs.State))
	}
	if strings.Join(names, " ") != "a-down=skipped b-ok=current c-left=leaving" {
		t.Errorf("status %v, want sorted by name", names)
	}
	if d := status[2].Detail; !strings.Contains(d, `its objects stay, its records and bindings go (deletion_policy = "orphan")`) {
		t.Errorf("orphan leaving detail %q", d)
	}
	if got := status[1].Modules[0].Drift; !reflect.DeepEqual(got, []string{"y", "z"}) {
		t.Errorf("drift %v, want sorted", got)
	}
	summary, attention := Summarize(status)
	if !reflect.DeepEqual(summary, map[string]int64{string(StateSkipped): 1, string(StateCurrent): 1, string(StateLeaving): 1}) {
		t.Errorf("summary %v", summary)
	}
	if _, ok := attention["a-down"]; ok || len(attention) != 1 || attention["c-left"] == "" {
		t.Errorf("attention %v: want the leaving cluster only (skipped ones are in skipped)", attention)
	}
}

func TestObservationFromAndDrifted(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "a", Revision: "r2"}, {Name: "b", Revision: "q"}}}
	status := []ClusterStatus{
		{Name: "z", State: StateDrifted, Modules: []ModuleStatus{
			{Module: "a", Revision: "r2", Result: records.BindingApplied, State: delivery.StateDrifted, Drift: []string{"x"}},
			{Module: "b", State: delivery.StatePending},
			{Module: "unconfigured", Revision: "u", Result: records.BindingApplied, State: delivery.StateDrifted}}},
		{Name: "m", State: StateJoining, Modules: []ModuleStatus{{Module: "a"}, {Module: "b"}}},
		{Name: "s", State: StateSkipped},
		{Name: "l", State: StateLeaving},
	}
	obs := ObservationFrom(status, map[string]string{"s": "paused"}, spec)
	if !reflect.DeepEqual(obs.Eligible, []string{"m", "z"}) || !reflect.DeepEqual(obs.Leaving, []string{"l"}) || obs.Skipped["s"] != "paused" {
		t.Errorf("eligible %v leaving %v skipped %v", obs.Eligible, obs.Leaving, obs.Skipped)
	}
	if len(obs.Bindings["z"]) != 2 || len(obs.Bindings["m"]) != 0 {
		t.Errorf("bindings %v: want z's two applied modules only", obs.Bindings)
	}
	if st := obs.Modules["b"].Clusters["z"]; !reflect.DeepEqual(st, delivery.ClusterState{State: delivery.StatePending}) {
		t.Errorf("b on z: %+v, want pending", st)
	}
	if st := obs.Modules["a"].Clusters["m"]; st.State != delivery.StatePending {
		t.Errorf("a on m (no state): %+v, want pending", st)
	}
	if _, ok := obs.Modules["unconfigured"]; ok {
		t.Error("an unconfigured module got an observation")
	}
	if got := Drifted(status); !reflect.DeepEqual(got, map[string]map[string]bool{"z": {"a": true, "unconfigured": true}}) {
		t.Errorf("Drifted = %v", got)
	}
}

func TestWavesPerModule(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "a", Revision: "ra"}, {Name: "b", Revision: "rb"}, {Name: "none", Revision: "rn"}}}
	spec.Policy.UpdateLimit = engine.UpdateLimitOf(2)
	p := BindingPlan{Apply: map[string][]string{"a": {"c1", "c2", "c3"}, "b": {"c4"}, "none": {}}}
	got := Waves(p, spec)
	want := map[string][][]string{"a": {{"c1", "c2"}, {"c3"}}, "b": {{"c4"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Waves = %v, want %v (a module with no clusters has no waves)", got, want)
	}
}
