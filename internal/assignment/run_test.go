package assignment

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Outcome → binding: applied (stamped with the injected clock) when the module runs there now,
// failed with the reason when it did not complete, unchanged when nothing happened there.
func TestBindingFor(t *testing.T) {
	m := Module{Name: "dns", Revision: "r2"}
	now := time.Date(2026, 11, 26, 9, 30, 15, 700_000_000, time.FixedZone("CET", 3600))
	applied := records.ModuleBinding{Module: "dns", Revision: "r2", AppliedAt: time.Date(2026, 11, 26, 8, 30, 15, 0, time.UTC), Result: records.BindingApplied}
	earlier := records.ModuleBinding{Module: "dns", Revision: "r2", AppliedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Result: records.BindingApplied}
	older := records.ModuleBinding{Module: "dns", Revision: "r1", AppliedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Result: records.BindingApplied}
	for _, tc := range []struct {
		name        string
		status      engine.Status
		prev        records.ModuleBinding
		bound       bool
		want        records.ModuleBinding
		wantChanged bool
	}{
		{"succeeded", engine.StatusSucceeded, older, true, applied, true},
		{"already current, bound as applied: kept with its time", engine.StatusAlreadyCurrent, earlier, true, earlier, false},
		{"already current, bound to another revision", engine.StatusAlreadyCurrent, older, true, applied, true},
		{"already current, not bound (adopted or imported)", engine.StatusAlreadyCurrent, records.ModuleBinding{}, false, applied, true},
		{"failed", engine.StatusFailed, older, true, records.ModuleBinding{Module: "dns", Revision: "r2", Result: records.BindingFailed, Reason: "boom"}, true},
		{"restored", engine.StatusRestored, older, true, records.ModuleBinding{Module: "dns", Revision: "r2", Result: records.BindingFailed, Reason: "boom"}, true},
		{"lost contact", engine.StatusLostContact, older, true, records.ModuleBinding{Module: "dns", Revision: "r2", Result: records.BindingFailed, Reason: "boom"}, true},
		{"not started", engine.StatusNotStarted, older, true, older, false},
		{"gone", engine.StatusGone, older, true, older, false},
	} {
		got, changed := BindingFor(engine.Outcome{Target: "c1", Status: tc.status, Error: "boom"}, m, tc.prev, tc.bound, now)
		if !reflect.DeepEqual(got, tc.want) || changed != tc.wantChanged {
			t.Errorf("%s: %+v changed=%v, want %+v changed=%v", tc.name, got, changed, tc.want, tc.wantChanged)
		}
	}
}

func TestCandidates(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "a"}, {Name: "b"}}}
	obs := &Observation{Eligible: []string{"c1", "c2", "c3"}}
	plan := Plan{Apply: map[string][]string{"a": {"c1"}, "b": {"c2", "c3"}}}

	if got, want := Candidates(spec, obs, plan, nil, false), map[string][]string{"a": {"c1"}, "b": {"c2", "c3"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("without a plan: %v, want the clusters that need each module %v", got, want)
	}
	spec.Mode = Reconcile
	if got, want := Candidates(spec, obs, plan, nil, false), map[string][]string{"a": {"c1", "c2", "c3"}, "b": {"c1", "c2", "c3"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("reconcile without a plan: %v, want every eligible cluster %v", got, want)
	}
	// With a plan: its clusters, as far as they are still eligible; c4 joined after it, c3 left.
	planned := map[string][]string{"a": {"c1", "c3"}, "b": {"c2"}}
	obs.Eligible = []string{"c1", "c2", "c4"}
	if got, want := Candidates(spec, obs, plan, planned, true), map[string][]string{"a": {"c1"}, "b": {"c2"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("with a plan: %v, want %v", got, want)
	}
}

// A run's writes outlive its context (a cancelled apply still records where each cluster is),
// for a bounded time only; they carry the run's write fence.
func TestRunSettlesWithinItsBound(t *testing.T) {
	svc := delivery.New(fleet.NewClients(&fleet.Management{Client: fake.NewClientBuilder().Build()}, nil), delivery.Options{})
	fenced := errors.New("fenced")
	ctx, cancel := context.WithCancel(records.WithFence(context.Background(), func() error { return fenced }))
	r := newRun(ctx, svc, RunRequest{Spec: Spec{Key: records.Key{Kind: "module-assignment", Namespace: "fleet", Name: "base"}}}, time.Now, time.Second)
	defer r.stopSettling()
	if !errors.Is(records.Fenced(r.settle), fenced) {
		t.Error("the settle context lost the run's write fence")
	}
	time.Sleep(100 * time.Millisecond)
	if r.settle.Err() != nil {
		t.Fatal("writes were cut off before the run was cancelled")
	}
	cancel()
	if r.settle.Err() != nil {
		t.Fatal("writes were cut off at once when the run was cancelled; they should settle first")
	}
	select {
	case <-r.settle.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("writes after cancellation are not bounded")
	}
}
