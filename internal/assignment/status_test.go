package assignment

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// statusWorld is a fleet of n clusters on revision r1 of module "web" (base r0 under it), with
// one drifted, one failed, one joined, one skipped and one leaving.
func statusWorld(n int) (*Observation, Spec) {
	spec := Spec{Modules: []Module{{Name: "base", Revision: "r0"}, {Name: "web", Revision: "r1", DependsOn: []string{"base"}}}, Mode: Reconcile}
	spec.Policy.UpdateLimit, _ = engine.ParseLimit("25%")
	obs := &Observation{Skipped: map[string]string{"down": "control plane not initialized"}, Bindings: map[string][]records.ModuleBinding{},
		Modules: map[string]*delivery.Observation{"base": {Clusters: map[string]delivery.ClusterState{}}, "web": {Clusters: map[string]delivery.ClusterState{}}},
		Leaving: []string{"gone-1"}}
	for i := range n {
		c := fmt.Sprintf("c%03d", i)
		obs.Eligible = append(obs.Eligible, c)
		if c == "c002" { // joined: nothing bound yet
			obs.Modules["base"].Clusters[c] = delivery.ClusterState{State: delivery.StatePending}
			obs.Modules["web"].Clusters[c] = delivery.ClusterState{State: delivery.StatePending}
			continue
		}
		obs.Bindings[c] = []records.ModuleBinding{{Module: "base", Revision: "r0", Result: records.BindingApplied}, {Module: "web", Revision: "r1", Result: records.BindingApplied}}
		obs.Modules["base"].Clusters[c] = delivery.ClusterState{State: delivery.StateCurrent, Revision: "r0"}
		obs.Modules["web"].Clusters[c] = delivery.ClusterState{State: delivery.StateCurrent, Revision: "r1"}
	}
	obs.Modules["web"].Clusters["c001"] = delivery.ClusterState{State: delivery.StateDrifted, Revision: "r1", Drift: []string{"ConfigMap ns/settings: .data.setting"}}
	obs.Bindings["c003"][1] = records.ModuleBinding{Module: "web", Revision: "r1", Result: records.BindingFailed, Reason: "Deployment ns/web not ready"}
	obs.Bindings["gone-1"] = obs.Bindings["c000"]
	return obs, spec
}

func TestStatusSummaryAttention(t *testing.T) {
	obs, spec := statusWorld(300)
	summary, attention := Summarize(Status(obs, spec))
	want := map[string]int64{string(StateCurrent): 297, string(StateDrifted): 1, string(StateFailed): 1, string(StateJoining): 1, string(StateSkipped): 1, string(StateLeaving): 1}
	if !reflect.DeepEqual(summary, want) {
		t.Errorf("summary = %v, want %v", summary, want)
	}
	wantAttention := map[string]string{
		"c001":   "drifted: module web drifted: ConfigMap ns/settings: .data.setting",
		"c002":   "joining: no module applied yet",
		"c003":   "failed: module web failed on revision r1: Deployment ns/web not ready",
		"gone-1": `leaving: no longer matches the selector; its modules are removed (deletion_policy = "delete")`,
	}
	if !reflect.DeepEqual(attention, wantAttention) {
		t.Errorf("attention = %#v", attention)
	}
}

// A plan worked out from the status a refresh recorded (private state, JSON) is the plan worked
// out from the observation itself: what makes apply's second plan agree with the first.
func TestObservationFromStatusPlansTheSame(t *testing.T) {
	obs, spec := statusWorld(40)
	spec.Modules[1].Revision = "r2" // a revision change of web
	status := Status(obs, spec)
	raw, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	var back []ClusterStatus
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	fresh := PlanAssignment(obs, spec, Drifted(status))
	fromState := PlanAssignment(ObservationFrom(back, obs.Skipped, spec), spec, Drifted(back))
	if !reflect.DeepEqual(fresh.Apply, fromState.Apply) {
		t.Fatalf("apply from state %v, fresh %v", fromState.Apply, fresh.Apply)
	}
	if got := len(fromState.Apply["web"]); got != 40 {
		t.Errorf("web goes to %d clusters, want all 40 (revision change)", got)
	}
	if got := strings.Join(fromState.Apply["base"], ","); got != "c001,c002" && got != "c002" {
		t.Errorf("base goes to %s, want only the joined cluster", got)
	}
	waves := Waves(fromState, spec)
	var counts []int
	for _, w := range waves["web"] {
		counts = append(counts, len(w))
	}
	if !reflect.DeepEqual(counts, []int{10, 10, 10, 10}) {
		t.Errorf("web waves %v, want 4 of 10 (25%% of 40)", counts)
	}
}

func TestOnlyIn(t *testing.T) {
	got := onlyIn([][]string{{"a", "b"}, {"c"}, {"d"}}, []string{"a", "d"})
	if !reflect.DeepEqual(got, [][]string{{"a"}, {"d"}}) {
		t.Errorf("onlyIn = %v", got)
	}
}
