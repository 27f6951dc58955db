package delivery

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

// Records missing (unrecorded.go): a cluster that holds the old revision's objects under the
// rollout's field manager but no records of the rollout (its record namespace was deleted) is
// unknown, not empty. A failing revision must not "restore" it to nothing: that would delete
// what ran before.

// oldLive is the old revision's objects as describeLive renders them: what ran before.
func (e *env) oldLive() string {
	e.t.Helper()
	return describeObjects(e.old.set.Objects)
}

// TestUnrecordedProvisioningRefused: the engine reaches a records-less cluster holding the old
// revision's objects (the plan was made before the records went, as env.run plans from the
// records alone): its provisioning record is refused, nothing is applied, nothing deleted.
func TestUnrecordedProvisioningRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startUnrecorded, faults{neverReady: true}}})
		c := e.clusters["c1"]
		r := e.run() // the invariants: a refused provisioning record leaves records and objects as they were
		o, _ := r.res.Outcome("c1")
		if o.Status != engine.StatusUnsettled || o.Failed || !strings.Contains(o.Error, "records missing: holds 2 objects of this rollout") {
			t.Errorf("c1 ended %s failed=%v (%s), want unsettled, not counted, saying its records are missing", o.Status, o.Failed, o.Error)
		}
		if len(c.deleted) != 0 || c.desiredApply != 0 || c.describeLive() != e.oldLive() {
			t.Errorf("deleted %v, desired applied %d times, runs\n%s\nwant the old revision's objects untouched", c.deleted, c.desiredApply, c.describeLive())
		}
	})
}

// TestUnrecordedRunHoldsBack: apply (Service.Run) sees the records-less cluster holding objects
// of the rollout, shows it records-missing with what it found, and holds it back: a failing
// revision leaves what ran before in place. The other cluster takes the revision as usual.
func TestUnrecordedRunHoldsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "1", engine.Rollback), []clusterSpec{
			{"c1", startUnrecorded, faults{neverReady: true}}, {"c2", startOld, faults{}}})
		c := e.clusters["c1"]
		run, err := e.svc.Run(context.Background(), RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
		if err != nil {
			t.Fatal(err)
		}
		// Only the objects the failing revision holds too are at stake (legacy is in no record
		// and in no inventory this run writes), so those are what the check finds.
		o, _ := run.Result.Outcome("c1")
		in := run.Plan.Intents["c1"]
		want := "records missing: holds 2 objects of this rollout, e.g. ConfigMap demo/web-config"
		if o.Status != engine.StatusSkipped || !strings.Contains(in.Reason, want) || !strings.Contains(in.Reason, "adopt = true") {
			t.Errorf("c1 ended %s (%s), want skipped saying %q and how to take them over", o.Status, in.Reason, want)
		}
		if o2, _ := run.Result.Outcome("c2"); o2.Status != engine.StatusSucceeded {
			t.Errorf("c2 ended %s (%s), want succeeded", o2.Status, o2.Error)
		}
		if len(c.deleted) != 0 || c.desiredApply != 0 || c.describeLive() != e.oldLive() {
			t.Errorf("deleted %v, desired applied %d times: want the old revision's objects untouched", c.deleted, c.desiredApply)
		}
		st := run.After.Clusters["c1"]
		if want := []string{"ConfigMap demo/web-config", "Deployment demo/web"}; st.State != StateRecordsMissing || !slices.Equal(st.Drift, want) {
			t.Errorf("after the run c1 reads %+v, want records-missing listing %q", st, want)
		}
		if got := e.describeRecords(c); got != e.initial["c1"].records {
			t.Errorf("c1 records %s, want them untouched (%s)", got, e.initial["c1"].records)
		}
	})
}

// TestUnrecordedAdoptOptIn: with the opt-in (adopt = true in the configuration), the objects
// found are taken over as pre-existing: recorded adopted with their content, so the failing
// revision's restore puts them back as they ran before instead of deleting them.
func TestUnrecordedAdoptOptIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startUnrecorded, faults{neverReady: true}}})
		e.spec.AdoptUnrecorded = true
		c := e.clusters["c1"]
		run, err := e.svc.Run(context.Background(), RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
		if err == nil {
			t.Fatal("the failing revision was reported as a success")
		}
		if o, _ := run.Result.Outcome("c1"); o.Status != engine.StatusFailed {
			t.Fatalf("c1 ended %s (%s), want failed and restored", o.Status, o.Error)
		}
		if c.describeLive() != e.oldLive() {
			t.Errorf("c1 runs\n%s\nwant the old revision's objects as they were", c.describeLive())
		}
		if want := []string{"/ConfigMap/demo/extra"}; !slices.Equal(c.deleted, want) {
			t.Errorf("deleted %v, want only %v (what the failed revision added)", c.deleted, want)
		}
		if want := []string{"/ConfigMap/demo/web-config", "apps/Deployment/demo/web"}; !slices.Equal(sorted(c.reverted), want) {
			t.Errorf("reverted %v, want %v put back to their content from before", c.reverted, want)
		}
		if len(run.Adopted) != 1 || !strings.Contains(run.Adopted[0], "c1: 2 objects were adopted") {
			t.Errorf("adopted notes %q, want c1's two objects named", run.Adopted)
		}
	})
}

// TestUnrecordedPlan: the plan shows the cluster records-missing and leaves it out of the waves,
// whether it is planned from the fleet as it reads now or from the state the refresh left.
func TestUnrecordedPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startUnrecorded, faults{}}, {"c2", startOld, faults{}}})
		ctx := context.Background()
		req := PlanRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}}
		res, err := e.svc.Plan(ctx, req)
		if err != nil || res.Refused != nil {
			t.Fatalf("plan: %v, refused %v", err, res.Refused)
		}
		if st := res.Observation.Clusters["c1"]; st.State != StateRecordsMissing {
			t.Errorf("c1 reads %+v, want records-missing", st)
		}
		if got := res.Plan.Waves; !slices.Equal(slices.Concat(got...), []string{"c2"}) {
			t.Errorf("waves %v, want c2 alone", got)
		}
		if in := res.Plan.Intents["c1"]; in.Action != engine.ActionSkip || !strings.Contains(in.Reason, "records missing") {
			t.Errorf("c1 intent %+v, want skipped: records missing", in)
		}
		req.Prior = &Prior{Clusters: map[string]ClusterState{
			"c1": {State: StateRecordsMissing, Drift: []string{"Deployment demo/web"}},
			"c2": {State: StateCurrent, Revision: e.old.revision},
		}}
		if res, err = e.svc.Plan(ctx, req); err != nil || res.Refused != nil {
			t.Fatalf("plan from state: %v, refused %v", err, res.Refused)
		}
		if got := res.Plan.Waves; !slices.Equal(slices.Concat(got...), []string{"c2"}) {
			t.Errorf("waves from state %v, want c2 alone", got)
		}
		req.Spec.AdoptUnrecorded = true
		if res, err = e.svc.Plan(ctx, req); err != nil || res.Refused != nil {
			t.Fatalf("plan with adopt: %v, refused %v", err, res.Refused)
		}
		if got := slices.Concat(res.Plan.Waves...); !slices.Contains(got, "c1") {
			t.Errorf("waves with adopt = true %v, want c1 in them", got)
		}
	})
}

// TestUnrecordedModuleRun: a module of an assignment goes through Run as a rollout does (its
// own key and field manager, the clusters its assignment picked): a cluster where the module's
// records are gone but its objects are there is held back the same way.
func TestUnrecordedModuleRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{
			{"c1", startUnrecorded, faults{neverReady: true}}, {"c2", startFresh, faults{}}})
		e.spec.Key = records.Key{Kind: "module-assignment", Namespace: "fleet", Name: "base.app"} // as assignment.Spec.ModuleKey
		e.spec.Policy.CanaryOptional = true
		c := e.clusters["c1"]
		run, err := e.svc.Run(context.Background(), RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"},
			Only: []string{"c1", "c2"}, OnlyKnown: true})
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := run.Result.Outcome("c1"); o.Status != engine.StatusSkipped || !strings.Contains(run.Plan.Intents["c1"].Reason, "records missing") {
			t.Errorf("c1 ended %s (%s), want skipped: records missing", o.Status, run.Plan.Intents["c1"].Reason)
		}
		if o, _ := run.Result.Outcome("c2"); o.Status != engine.StatusSucceeded {
			t.Errorf("c2 ended %s (%s), want succeeded", o.Status, o.Error)
		}
		if len(c.deleted) != 0 || c.describeLive() != e.oldLive() {
			t.Errorf("c1: deleted %v: want what ran before untouched", c.deleted)
		}
		if _, ok := run.After.RecordsMissing()["c1"]; !ok {
			t.Errorf("after the run c1 reads %+v, want records-missing", run.After.Clusters["c1"])
		}
	})
}

// TestUnrecordedRefresh: a refresh knows the bundle from the state (ObserveRendered without
// values): a cluster an earlier run placed whose records are gone reads records-missing, with the
// objects found; a records-less cluster the rollout never reached is not read at all.
func TestUnrecordedRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{
			{"c1", startUnrecorded, faults{}}, {"c2", startUnrecorded, faults{}}, {"c3", startOld, faults{}}})
		ctx := context.Background()
		if err := e.svc.managementStore(e.spec.RecordNamespace).SaveProgress(ctx, e.spec.Key, records.Progress{
			Phase: records.PhaseSucceeded, Revision: e.old.revision, Placed: []string{"c1", "c3"}}); err != nil {
			t.Fatal(err)
		}
		obs, err := e.svc.ObserveRendered(ctx, fleet.Query{Namespace: "fleet"}, e.spec.Key, e.spec.RecordNamespace,
			Rendering{Revision: e.old.revision, Template: e.old.set})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"ConfigMap demo/legacy", "ConfigMap demo/web-config", "Deployment demo/web"}
		if st := obs.Clusters["c1"]; st.State != StateRecordsMissing || !slices.Equal(st.Drift, want) {
			t.Errorf("c1 reads %+v, want records-missing with %q", st, want)
		}
		if reason := obs.RecordsMissing()["c1"]; !strings.HasPrefix(reason, "records missing: holds 3 objects of this rollout, e.g. ConfigMap demo/legacy") {
			t.Errorf("c1's reason %q", reason)
		}
		if st := obs.Clusters["c2"]; st.State != StatePending || e.clusters["c2"].existing != 0 {
			t.Errorf("c2 (never placed) reads %+v after %d reads of its objects, want pending and none", st, e.clusters["c2"].existing)
		}
		if st := obs.Clusters["c3"]; st.State != StateCurrent || e.clusters["c3"].existing != 0 {
			t.Errorf("c3 (recorded) reads %+v after %d reads of its objects, want current and none", st, e.clusters["c3"].existing)
		}
	})
}
