package assignment

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
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
	plan := BindingPlan{Apply: map[string][]string{"a": {"c1"}, "b": {"c2", "c3"}}}

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
	svc := delivery.New(fleet.NewClients(&fleet.Management{Client: fake.NewClientBuilder().Build()}, nil), settings.Settings{})
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

// verify.check_job runs once per cluster, after the last module the run delivers there (in
// depends_on order), rendered for the cluster with values; a failing Job fails that module on
// that cluster alone, as a failed verification does (bound failed, the run fails naming it).
func TestRunCheckJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := worldSpec(t, Reconcile, worldPolicy(10, 0, engine.Halt))
		spec.Values = &delivery.Values{}
		for i := range spec.Modules {
			spec.Modules[i].Objects = &manifest.Set{}
		}
		job, err := delivery.ParseCheckJob("apiVersion: batch/v1\nkind: Job\nmetadata: {name: smoke, namespace: \"ns-${cluster_name}\"}\n" +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: smoke, image: registry.example/smoke:1}]\n")
		if err != nil {
			t.Fatal(err)
		}
		spec.CheckJob = &delivery.CheckJob{Job: job, Timeout: time.Minute}
		f := newFakeFleet(t, spec)
		for _, name := range []string{"c1", "c2", "c3"} {
			f.add(name)
		}
		// c2 runs mon already, c3 app and mon: their last module changed is app, crds.
		f.seed("c2", "mon", "mon-r2")
		f.seed("c3", "app", "app-r2")
		f.seed("c3", "mon", "mon-r2")
		f.clusters["c2"].checkJobFails = true
		a := f.apply(f.plan())
		for cluster, want := range map[string][]string{"c1": {"mon ns-c1"}, "c2": {"app ns-c2"}, "c3": {"crds ns-c3"}} {
			if got := f.clusters[cluster].checkJobs; !slices.Equal(got, want) {
				t.Errorf("%s ran the check Job %v, want once, %v", cluster, got, want)
			}
		}
		if a.err == nil || !strings.Contains(a.err.Error(), "module app") {
			t.Fatalf("run: %v, want it failed naming module app", a.err)
		}
		for cluster, want := range map[string]records.BindingResult{"c1": records.BindingApplied, "c2": records.BindingFailed, "c3": records.BindingApplied} {
			m := map[string]string{"c1": "mon", "c2": "app", "c3": "crds"}[cluster]
			if b, _ := (&Observation{Bindings: a.after}).Binding(cluster, m); b.Result != want || (want == records.BindingFailed && !strings.Contains(b.Reason, "check Job ns-c2/smoke failed")) {
				t.Errorf("%s: module %s bound %+v, want %s", cluster, m, b, want)
			}
		}
	})
}

// CheckJobAfter: the clusters of targets where no later module goes; none without a Job.
func TestCheckJobAfter(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	candidates := map[string][]string{"a": {"c1", "c2", "c3"}, "b": {"c2"}, "c": {"c3"}}
	if got := CheckJobAfter(spec, "a", candidates, []string{"c1", "c2", "c3"}); got != nil {
		t.Fatalf("without verify.check_job: %+v", got)
	}
	spec.CheckJob = &delivery.CheckJob{Timeout: time.Minute}
	if got := CheckJobAfter(spec, "a", candidates, []string{"c1", "c2", "c3"}); got == nil || !reflect.DeepEqual(got.Only, map[string]bool{"c1": true}) {
		t.Errorf("after a: %+v, want c1 alone", got)
	}
	if got := CheckJobAfter(spec, "b", candidates, []string{"c2"}); got == nil || !reflect.DeepEqual(got.Only, map[string]bool{"c2": true}) {
		t.Errorf("after b: %+v, want c2", got)
	}
	if got := CheckJobAfter(spec, "a", candidates, []string{"c2", "c3"}); got != nil {
		t.Errorf("after a where later modules go everywhere: %+v, want none", got)
	}
	if spec.CheckJob.Only != nil {
		t.Error("CheckJobAfter changed the spec's Job")
	}
}
