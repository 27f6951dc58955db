package delivery

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestMoved: what the previous engine's records say of a cluster folded into the new engine's.
// A cluster the new engine verified nothing on is the previous engine's (its revision, with it
// as the backup of a move cut short); one verified on the new engine that the previous one
// still holds is applied again (drifted) so that the previous one lets go; a change the previous
// engine left in flight holds the cluster back.
func TestMoved(t *testing.T) {
	obs := func(rec engine.TargetRecord) observed {
		_, st := clusterStateOf(&records.State{})
		if rec.Current != "" {
			st = ClusterState{Revision: rec.Current, Backup: rec.Backup, State: StateCurrent}
		}
		return observed{record: rec, state: st}
	}
	none := obs(engine.TargetRecord{})
	onOld := obs(engine.TargetRecord{Current: "rOld"})
	for _, tc := range []struct {
		name                string
		cur, prev           observed
		wantRec             engine.TargetRecord
		wantState           State
		moving, holds, skip bool
	}{
		{name: "previous engine holds nothing", cur: none, prev: none, wantRec: engine.TargetRecord{}, wantState: StatePending},
		{name: "not moved yet", cur: none, prev: onOld, wantRec: engine.TargetRecord{Current: "rOld"}, wantState: StateCurrent, moving: true, holds: true},
		{name: "move cut short", cur: obs(engine.TargetRecord{Provisioning: "rNew"}), prev: onOld,
			wantRec: engine.TargetRecord{Current: "rOld", Provisioning: "rNew", Backup: "rOld"}, wantState: StateProvisioning, moving: true, holds: true},
		{name: "verified, previous engine not let go yet", cur: obs(engine.TargetRecord{Current: "rNew"}), prev: onOld,
			wantRec: engine.TargetRecord{Current: "rNew"}, wantState: StateDrifted, holds: true},
		{name: "previous engine left a change in flight", cur: none, prev: obs(engine.TargetRecord{Current: "rOld", Provisioning: "rOlder", Backup: "rOld"}),
			wantRec: engine.TargetRecord{}, holds: true, skip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, moving, holds, skip := moved(tc.cur, tc.prev)
			if moving != tc.moving || holds != tc.holds || (skip != "") != tc.skip {
				t.Fatalf("moving %v holds %v skip %q; want %v %v %v", moving, holds, skip, tc.moving, tc.holds, tc.skip)
			}
			if tc.skip {
				return
			}
			if fmt.Sprint(out.record) != fmt.Sprint(tc.wantRec) || out.state.State != tc.wantState {
				t.Fatalf("record %+v state %s; want %+v %s", out.record, out.state.State, tc.wantRec, tc.wantState)
			}
		})
	}
	// The engine plans a cluster the previous engine holds as a change from its revision, which
	// a failure returns to (the new engine letting go).
	plan := engine.PlanRollout([]engine.Target{
		{Name: "a", Record: engine.TargetRecord{Current: "rOld"}},
		{Name: "b", Record: engine.TargetRecord{Current: "rOld", Provisioning: "rNew", Backup: "rOld"}},
		{Name: "c", Record: engine.TargetRecord{Current: "rNew"}, Drifted: true},
	}, "rNew", testPolicy(t, "100%", "0", engine.Halt))
	for _, name := range []string{"a", "b"} {
		if in := plan.Intents[name]; in.Action != engine.ActionApply || in.RestoreTo != "rOld" {
			t.Errorf("%s: intent %+v, want applied with rOld to return to", name, in)
		}
	}
	if in := plan.Intents["c"]; in.Action != engine.ActionApply {
		t.Errorf("c: intent %+v, want applied again", in)
	}
}

// TestMoveToFluxLeavesRefusedClusterOnDirect moves a rollout delivered directly to Flux (the fake
// kustomize-controller), one cluster of which fails the revision's health check through Flux. The
// run completes within max_failures: the other cluster verified on Flux and direct delivery let go
// of it (its records gone, its objects left); the failing one is refused, not the revision's
// failure (nothing in the ledger), its Kustomization and Flux records let go without pruning, and
// direct delivery is still in charge there, its records and objects untouched. The next
// observation says it is still to move.
func TestMoveToFluxLeavesRefusedClusterOnDirect(t *testing.T) {
	registries := inMemoryRegistries(t)
	synctest.Test(t, func(t *testing.T) {
		policy := testPolicy(t, "1", "1", engine.Halt)
		policy.VerifyTimeout, policy.RollbackTimeout = time.Minute, time.Minute
		e := newEnv(t, policy, []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}})
		e.spec.ClusterGates = false
		ff := newFakeFlux(t, e.spec.Key, "fleet", &apiFaults{})
		_, ff.revisionOf = fluxDigests(t, e.old, e.desired)
		registries.serve("registry.move.test", inMemoryRegistry())
		ff.addCluster("c1", "", fluxFault{fail: fluxHealthCheck}, 1)
		ff.addCluster("c2", "", fluxFault{}, 2)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go ff.run(ctx)

		base := *e.svc
		base.mgmt = &fleet.Management{Client: ff.api}
		base.discover = func(ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
			q.WithoutSecrets = false // the fake fleet lists the same Clusters either way
			return e.discover(ctx, q)
		}
		base.goneReason = func(ctx context.Context, namespace, name string, _ bool) (string, error) {
			return e.goneReason(ctx, namespace, name, false)
		}
		svc := base.WithFlux(&FluxSettings{Repository: "oci://registry.move.test/gradual/web"}).MovingFrom(nil)
		if !svc.Moving() || base.MovingFrom(nil).Moving() {
			t.Fatal("a Flux service moving from direct delivery does not say so, or a direct one moving from itself does")
		}
		run, err := svc.Run(ctx, RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
		if err != nil {
			t.Fatalf("the run failed: %v", err)
		}
		outcomes := map[string]engine.Outcome{}
		for _, o := range run.Result.Outcomes {
			outcomes[o.Target] = o
		}
		if o := outcomes["c1"]; o.Status != engine.StatusFailed || !o.Failed || o.Invalid {
			t.Errorf("c1: %+v, want failed and counted, not recorded invalid", o)
		}
		if o := outcomes["c2"]; o.Status != engine.StatusSucceeded {
			t.Errorf("c2: %+v, want succeeded", o)
		}
		ledger, err := records.NewManagementStore(ff.base, e.spec.RecordNamespace).Ledger(ctx, e.spec.Key)
		if err != nil || len(ledger) > 0 {
			t.Errorf("ledger %+v (%v), want empty: the content did not fail", ledger, err)
		}
		if st := e.load(e.clusters["c1"]); st.Current == nil || st.Current.Revision != e.old.revision || st.Provisioning != nil {
			t.Errorf("c1's direct records: %s, want the old revision current, untouched", describeState(st))
		}
		if live := e.clusters["c1"].describeLive(); live != e.objectsOf(e.clusters["c1"], e.old.revision) {
			t.Errorf("c1's objects:\n%s\nwant the old revision's, untouched", live)
		}
		if st := e.load(e.clusters["c2"]); !holdsNothing(st) {
			t.Errorf("c2's direct records: %s, want none (direct delivery let go)", describeState(st))
		}
		if live := e.clusters["c2"].describeLive(); live != e.objectsOf(e.clusters["c2"], e.old.revision) {
			t.Errorf("c2's objects:\n%s\nwant them left in place by direct delivery", live)
		}
		ks := ff.kustomization("c1")
		if err := ff.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); !apierrors.IsNotFound(err) {
			t.Errorf("c1's Kustomization: %v, want it let go", err)
		}
		if fc := ff.clusters["c1"]; len(fc.pruned) > 0 {
			t.Errorf("Flux pruned on c1 as it let go: %v", fc.pruned)
		}
		ks = ff.kustomization("c2")
		if err := ff.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			t.Errorf("c2's Kustomization: %v, want it in charge", err)
		}
		if !slices.Equal(run.Moved, []string{"c2"}) || len(run.MoveFailures) > 0 {
			t.Errorf("moved %v (failures %v), want c2", run.Moved, run.MoveFailures)
		}
		if _, ok := run.After.Moving["c1"]; !ok || len(run.After.Moving) != 1 || len(run.After.Previous) != 1 {
			t.Errorf("after the run: moving %v, previous %v; want c1 still to move", run.After.Moving, run.After.Previous)
		}

		// Destroyed half-way: removed from both engines, wherever each holds the rollout.
		for _, c := range e.clusters {
			c.destroying = true
		}
		if _, err := svc.Destroy(ctx, DestroyRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}}); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		for _, name := range []string{"c1", "c2"} {
			if st := e.load(e.clusters[name]); !holdsNothing(st) {
				t.Errorf("%s after destroy: direct records %s, want none", name, describeState(st))
			}
			ks := ff.kustomization(name)
			if err := ff.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); !apierrors.IsNotFound(err) {
				t.Errorf("%s after destroy: Kustomization %v, want it gone", name, err)
			}
		}
		if live := e.clusters["c1"].describeLive(); live != e.objectsOf(e.clusters["c1"], "") {
			t.Errorf("c1 after destroy, on direct delivery until then:\n%s\nwant its objects deleted", live)
		}
		if fc := ff.clusters["c2"]; len(fc.pruned) != 1 {
			t.Errorf("c2 after destroy, on Flux until then: pruned %v, want what Flux applied pruned", fc.pruned)
		}
		cancel()
	})
}

// moveEnv is a fleet of c1 and c2 delivered directly (e) and through the fake Flux (ff), with
// the service base reaching both.
func moveEnv(t *testing.T, registries *registryTransport, direct []clusterSpec, flux map[string]string, faults map[string]fluxFault) (*env, *fakeKustomizeController, Service) {
	policy := testPolicy(t, "1", "1", engine.Halt)
	policy.VerifyTimeout, policy.RollbackTimeout = time.Minute, time.Minute
	e := newEnv(t, policy, direct)
	e.spec.ClusterGates = false
	ff := newFakeFlux(t, e.spec.Key, "fleet", &apiFaults{})
	_, ff.revisionOf = fluxDigests(t, e.old, e.desired)
	registries.serve("registry.move.test", inMemoryRegistry())
	for i, name := range []string{"c1", "c2"} {
		ff.addCluster(name, flux[name], faults[name], uint64(i))
	}
	base := *e.svc
	base.mgmt = &fleet.Management{Client: ff.api}
	base.discover = func(ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
		q.WithoutSecrets = false // the fake fleet lists the same Clusters either way
		return e.discover(ctx, q)
	}
	base.goneReason = func(ctx context.Context, namespace, name string, _ bool) (string, error) {
		return e.goneReason(ctx, namespace, name, false)
	}
	return e, ff, base
}

var moveSettings = &FluxSettings{Repository: "oci://registry.move.test/gradual/web"}

// TestMoveToFluxResumesACutShortMove: a run killed mid-move left c2 provisioning through Flux
// (its Flux records say so, its direct records still hold the old revision). The next run
// applies it again through Flux (a failure would return it to direct delivery), it verifies,
// and direct delivery lets go of both clusters.
func TestMoveToFluxResumesACutShortMove(t *testing.T) {
	registries := inMemoryRegistries(t)
	synctest.Test(t, func(t *testing.T) {
		e, ff, base := moveEnv(t, registries, []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}}, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go ff.run(ctx)
		svc := base.WithFlux(moveSettings).MovingFrom(nil)
		store := svc.fluxStore(e.spec.RecordNamespace)
		if err := store.MarkProvisioning(ctx, FluxRecordKey(e.spec.Key, "c2"), e.desired.record()); err != nil {
			t.Fatal(err)
		}
		obs, err := svc.Observe(ctx, fleet.Query{Namespace: "fleet"}, e.spec.Key, e.spec.RecordNamespace, false)
		if err != nil {
			t.Fatal(err)
		}
		plan := engine.PlanRollout(obs.Targets, e.spec.Revision, e.spec.Policy)
		if in := plan.Intents["c2"]; in.Action != engine.ActionApply || in.RestoreTo != e.old.revision || in.Provisioning != e.spec.Revision {
			t.Fatalf("c2's intent %+v: want the cut-short move applied again, returning to direct delivery's revision on failure", in)
		}
		run, err := svc.Run(ctx, RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
		if err != nil {
			t.Fatalf("the run failed: %v", err)
		}
		if !slices.Equal(run.Moved, []string{"c1", "c2"}) || len(run.After.Previous) > 0 {
			t.Fatalf("moved %v, still held by direct delivery %v; want both moved", run.Moved, run.After.Previous)
		}
		for _, name := range []string{"c1", "c2"} {
			if st := e.load(e.clusters[name]); !holdsNothing(st) {
				t.Errorf("%s: direct records %s, want none", name, describeState(st))
			}
			if truth := ff.truth(name); truth != simDesired {
				t.Errorf("%s runs %q through Flux, want the desired revision", name, truth)
			}
		}
		cancel()
	})
}

// TestMoveToDirectLeavesRefusedClusterOnFlux moves a rollout delivered through Flux to direct
// delivery; c1's objects never become ready delivering directly. c1 is refused (counted, nothing
// in the ledger): direct delivery lets go of it (its records gone, nothing deleted) and Flux, never
// touched, stays in charge with its Kustomization. c2 moves: Flux stops pruning and lets go
// (nothing pruned), and direct delivery holds it.
func TestMoveToDirectLeavesRefusedClusterOnFlux(t *testing.T) {
	registries := inMemoryRegistries(t)
	synctest.Test(t, func(t *testing.T) {
		e, ff, base := moveEnv(t, registries, []clusterSpec{{"c1", startFresh, faults{neverReady: true}}, {"c2", startFresh, faults{}}},
			nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go ff.run(ctx)
		// Both run the old revision through Flux. (A move changes the revision, since the
		// engine's settings are part of it: here the content changes too, which the move does
		// not mind.)
		flux, fluxSpec := base.WithFlux(moveSettings), e.spec
		fluxSpec.Objects, fluxSpec.Revision = e.old.set, e.old.revision
		if _, err := flux.Run(ctx, RunRequest{Spec: fluxSpec, Query: fleet.Query{Namespace: "fleet"}}); err != nil {
			t.Fatalf("delivering through Flux: %v", err)
		}
		svc := base.MovingFrom(moveSettings)
		if !svc.Moving() || svc.PreviousEngineName() != "Flux" || svc.EngineName() != "direct delivery" {
			t.Fatalf("moving from %q to %q", svc.PreviousEngineName(), svc.EngineName())
		}
		run, err := svc.Run(ctx, RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
		if err != nil {
			t.Fatalf("the run failed: %v", err)
		}
		outcomes := map[string]engine.Outcome{}
		for _, o := range run.Result.Outcomes {
			outcomes[o.Target] = o
		}
		if o := outcomes["c1"]; o.Status != engine.StatusFailed || !o.Failed || o.Invalid {
			t.Errorf("c1: %+v, want failed and counted, not recorded invalid", o)
		}
		if ledger, err := records.NewManagementStore(ff.base, e.spec.RecordNamespace).Ledger(ctx, e.spec.Key); err != nil || len(ledger) > 0 {
			t.Errorf("ledger %+v (%v), want empty", ledger, err)
		}
		if st := e.load(e.clusters["c1"]); !holdsNothing(st) {
			t.Errorf("c1's direct records: %s, want none (direct delivery let go)", describeState(st))
		}
		ks := ff.kustomization("c1")
		if err := ff.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil || ff.truth("c1") != simOld {
			t.Errorf("c1's Kustomization: %v, running %q; want Flux still in charge", err, ff.truth("c1"))
		}
		if st := e.load(e.clusters["c2"]); st.Current == nil || st.Current.Revision != e.spec.Revision {
			t.Errorf("c2's direct records: %s, want the revision current", describeState(st))
		}
		ks = ff.kustomization("c2")
		if err := ff.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); !apierrors.IsNotFound(err) {
			t.Errorf("c2's Kustomization: %v, want Flux let go", err)
		}
		for _, name := range []string{"c1", "c2"} {
			if fc := ff.clusters[name]; len(fc.pruned) > 0 {
				t.Errorf("Flux pruned %v on %s", fc.pruned, name)
			}
		}
		if !slices.Equal(run.Moved, []string{"c2"}) || len(run.After.Moving) != 1 {
			t.Errorf("moved %v, moving after %v; want c2 moved, c1 still to move", run.Moved, run.After.Moving)
		}
		cancel()
	})
}
