package assignment

import (
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// moveObservation is one module m on c1 and c2, bound applied on revision bound on both, its
// records current on it, with previous the clusters the engine moved from still holds.
func moveObservation(bound string, previous ...string) *Observation {
	b := records.ModuleBinding{Module: "m", Revision: bound, Result: records.BindingApplied}
	mo := &delivery.Observation{Clusters: map[string]delivery.ClusterState{}, Previous: map[string]string{}, Moving: map[string]string{}}
	for _, c := range []string{"c1", "c2"} {
		mo.Clusters[c] = delivery.ClusterState{State: delivery.StateCurrent, Revision: bound}
	}
	for _, c := range previous {
		mo.Previous[c], mo.Moving[c] = bound, bound
	}
	return &Observation{Eligible: []string{"c1", "c2"}, Skipped: map[string]string{},
		Bindings: map[string][]records.ModuleBinding{"c1": {b}, "c2": {b}}, Modules: map[string]*delivery.Observation{"m": mo}}
}

// ApplyOnce re-applies nothing it applied already, but a cluster the engine moved from still
// holds is moved: applied again with the module's revision. One that kept an older version is
// refused (the provider cannot pin that content on the new engine), naming it; the clusters the
// old engine let go of are kept, as always. In Reconcile a move is a new revision (the engine's
// settings are part of it), applied everywhere as any other.
func TestPlanAssignmentMovesApplyOnce(t *testing.T) {
	spec := Spec{Mode: ApplyOnce, Modules: []Module{{Name: "m", Version: "1.0", Revision: "r1"}}}
	p := PlanAssignment(moveObservation("r1", "c2"), spec, nil)
	if got := p.Apply["m"]; len(got) != 1 || got[0] != "c2" {
		t.Errorf("ApplyOnce moving c2: applies %v, want [c2]", got)
	}
	if len(p.MovesOld) != 0 || len(p.KeptOld) != 0 {
		t.Errorf("ApplyOnce moving on the configured version: moves old %v, kept old %v", p.MovesOld, p.KeptOld)
	}
	if p := PlanAssignment(moveObservation("r1"), spec, nil); len(p.Apply) != 0 {
		t.Errorf("ApplyOnce, nothing held by the old engine: applies %v", p.Apply)
	}

	// The move itself changes the revision (the engine's pull settings are part of it): bound to
	// the configured content under the old engine (MovedFromRevision), c2 is moved, not refused.
	moving := Spec{Mode: ApplyOnce, Modules: []Module{{Name: "m", Version: "1.0", Revision: "r1-flux", MovedFromRevision: "r1"}}}
	p = PlanAssignment(moveObservation("r1", "c1", "c2"), moving, nil)
	if got := p.Apply["m"]; len(got) != 2 || len(p.MovesOld) != 0 {
		t.Errorf("ApplyOnce moving the configured content: applies %v, moves old %v; want both clusters, no refusal", p.Apply, p.MovesOld)
	}

	// c1 kept r0 (an older version) and the old engine holds it: refused; c2 moved already.
	spec.Modules[0].Revision = "r1"
	obs := moveObservation("r0", "c1")
	p = PlanAssignment(obs, spec, nil)
	if got := p.MovesOld["m"]; len(got) != 1 || got[0] != "c1" {
		t.Errorf("moving a cluster that kept an older version: moves old %v, want [c1]", p.MovesOld)
	}
	if got := p.KeptOld["m"]; len(got) != 1 || got[0] != "c2" {
		t.Errorf("kept old %v, want [c2] (not moving)", p.KeptOld)
	}
	res := decide(obs, PlanRequest{Spec: spec})
	if res.Refused == nil || res.Refused.Attribute != "delivery" || !strings.Contains(res.Refused.Err.Error(), "module m (version 1.0): c1") {
		t.Errorf("decide: refused %+v, want delivery naming module m on c1", res.Refused)
	}

	// Reconcile: the move is a new revision, applied to every cluster.
	spec.Mode = Reconcile
	if p := PlanAssignment(moveObservation("r0", "c1", "c2"), spec, nil); len(p.Apply["m"]) != 2 || len(p.MovesOld) != 0 {
		t.Errorf("Reconcile: applies %v, moves old %v; want both clusters, no refusal", p.Apply, p.MovesOld)
	}
}

// A plan made from the state (the refresh's per-cluster status, which holds nothing of the old
// engine) decides as apply will: what the live read found the old engine holds is moved.
func TestDecideFromStateSeesTheOldEngine(t *testing.T) {
	spec := Spec{Mode: ApplyOnce, Modules: []Module{{Name: "m", Version: "1.0", Revision: "r1"}}}
	prior := Status(moveObservation("r1"), spec)
	res := decide(moveObservation("r1", "c1"), PlanRequest{Spec: spec, Prior: prior, PriorSkipped: map[string]string{}})
	if !res.FromState {
		t.Fatal("not planned from the state")
	}
	if got := res.Plan.Apply["m"]; len(got) != 1 || got[0] != "c1" {
		t.Errorf("from the state: applies %v, want [c1] (the old engine holds it)", res.Plan.Apply)
	}
	if got := res.Waves["m"]; len(got) != 1 {
		t.Errorf("waves %v, want one wave of c1", got)
	}
}

// MoveDone: the move is over only once every module was read moving and none is held by the old
// engine, nor skipped, anywhere; Moving counts the (module, cluster) pairs still on it.
func TestMoveDone(t *testing.T) {
	two := func(a, b *delivery.Observation) *Observation {
		return &Observation{Skipped: map[string]string{}, Modules: map[string]*delivery.Observation{"a": a, "b": b}}
	}
	done := &delivery.Observation{Previous: map[string]string{}, Moving: map[string]string{}}
	held := &delivery.Observation{Previous: map[string]string{"c1": "r"}, Moving: map[string]string{"c1": "r"}}
	for _, tc := range []struct {
		name   string
		obs    *Observation
		done   bool
		moving int
	}{
		{"not read", nil, false, 0},
		{"read without the old engine", two(&delivery.Observation{}, done), false, 0},
		{"one module still held", two(done, held), false, 1},
		{"both held", two(held, held), false, 2},
		{"a module's cluster skipped", two(done, &delivery.Observation{Previous: map[string]string{}, Skipped: map[string]string{"c2": "unreachable"}}), false, 0},
		{"the assignment's cluster skipped", &Observation{Skipped: map[string]string{"c2": "unreachable"}, Modules: map[string]*delivery.Observation{"a": done}}, false, 0},
		{"every module let go", two(done, done), true, 0},
	} {
		if got := tc.obs.MoveDone(); got != tc.done {
			t.Errorf("%s: MoveDone %v, want %v", tc.name, got, tc.done)
		}
		if tc.obs != nil {
			if got := tc.obs.Moving(); got != tc.moving {
				t.Errorf("%s: Moving %d, want %d", tc.name, got, tc.moving)
			}
		}
	}
}

// moveLines: one line per module for the clusters moved, one per cluster not let go yet.
func TestMoveLines(t *testing.T) {
	moved, failures := moveLines("app", &delivery.RunResult{Moved: []string{"c2", "c1"}, MoveFailures: []string{"c3: Flux did not let go yet"}})
	if len(moved) != 1 || moved[0] != "module app: c1, c2" || len(failures) != 1 || failures[0] != "module app: c3: Flux did not let go yet" {
		t.Errorf("moved %q, failures %q", moved, failures)
	}
	if moved, failures := moveLines("app", &delivery.RunResult{}); moved != nil || failures != nil {
		t.Errorf("nothing moved: %q %q", moved, failures)
	}
}
