package delivery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestClaims: an object another owner's records hold on a cluster is claimed, whatever API
// version either side names it in; Namespaces may be shared; the caller's own key is no claim.
func TestClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startFresh, faults{}}})
		other := records.Key{Kind: "module-assignment", Namespace: "fleet", Name: "addons.web"}
		store := records.NewWorkloadStore(e.clusters["c1"].base, e.spec.RecordNamespace)
		if err := store.MarkProvisioning(context.Background(), other, records.Revision{Revision: "abc123", Inventory: []records.ObjectRef{
			{Group: "apps", Version: "v1beta2", Kind: "Deployment", Namespace: "demo", Name: "web"}, // desired names it apps/v1
			{Version: "v1", Kind: "Namespace", Name: "demo"},
			{Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "unrelated"},
		}}); err != nil {
			t.Fatal(err)
		}
		claims, err := e.svc.Claims(context.Background(), e.spec, []string{"c1", "c2"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) != 1 || claims[0] != (Claim{Cluster: "c1", Object: "Deployment demo/web", Owner: other}) {
			t.Fatalf("claims = %+v, want Deployment demo/web on c1, held by %s (the rollout's own records are no claim)", claims, other)
		}
		msg := ClaimsError(claims, e.spec.Key.Describe()).Error()
		for _, want := range []string{"Object Claimed By Two Owners", "rollout fleet/web", "Deployment demo/web in cluster c1 is managed by module-assignment fleet/addons.web"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
	})
}

// TestLeave: a cluster the rollout leaves loses the objects it made with deletion_policy
// delete, keeps them with orphan, and loses the records either way; adopted objects stay.
func TestLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startFresh, faults{}}, {"c2", startOld, faults{}}})
		e.seed("c1", foreignConfig(t), "kubectl-client-side-apply")
		if r := e.run(); r.res.Err() != nil {
			t.Fatal(r.res.Err())
		}
		for _, c := range e.clusters {
			c.destroying = true
		}
		left, failures, notes := e.svc.leave(context.Background(), e.spec, []string{"c1"}, false, e.logf)
		if len(left) != 1 || len(failures) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "ConfigMap demo/web-config") {
			t.Fatalf("leave c1 (delete): left %v, failures %v, notes %q", left, failures, notes)
		}
		c1 := e.clusters["c1"]
		if _, ok := c1.live["/ConfigMap/demo/web-config"]; !ok || len(c1.live) != 1 {
			t.Errorf("c1 after leaving (delete) runs\n%s\nwant only the adopted web-config", c1.describeLive())
		}
		if st := e.load(c1); st.Current != nil || st.Backup != nil {
			t.Errorf("c1 records after leaving: %s", describeState(st))
		}

		c2 := e.clusters["c2"]
		before := c2.describeLive()
		c2.deleted = nil // the run pruned legacy
		if left, failures, _ := e.svc.leave(context.Background(), e.spec, []string{"c2"}, true, e.logf); len(left) != 1 || len(failures) != 0 {
			t.Fatalf("leave c2 (orphan): left %v, failures %v", left, failures)
		}
		if got := c2.describeLive(); got != before || len(c2.deleted) != 0 {
			t.Errorf("c2 after leaving (orphan) runs\n%s\nwant\n%s", got, before)
		}
		if want := []string{"/ConfigMap/demo/extra", "/ConfigMap/demo/web-config", "apps/Deployment/demo/web"}; !slices.Equal(sorted(c2.orphaned), want) {
			t.Errorf("c2 left (orphan): objects handed to the legacy field manager %v, want %v", c2.orphaned, want)
		}
		if st := e.load(c2); st.Current != nil || st.Backup != nil {
			t.Errorf("c2 records after leaving: %s", describeState(st))
		}
	})
}

// TestOwnersAcrossRecordNamespaces: an object another rollout applied, whose records live in
// another record namespace, is claimed by that rollout's field manager on the live object:
// plan's Claims and apply's CheckOwners refuse it naming the rollout, and a run's provisioning
// applies nothing there. An object only the legacy field manager holds is ours to take.
func TestOwnersAcrossRecordNamespaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newEnv(t, testPolicy(t, "1", "1", engine.Rollback), []clusterSpec{{"c1", startFresh, faults{}}, {"c2", startFresh, faults{}}})
		other := records.Key{Kind: "rollout", Namespace: "team-b", Name: "web"}
		store := records.NewWorkloadStore(e.clusters["c2"].base, "team-b-records")
		if err := store.MarkProvisioning(ctx, other, records.Revision{Revision: "abc123", Inventory: []records.ObjectRef{
			{Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "web-config"},
		}}); err != nil {
			t.Fatal(err)
		}
		e.seed("c2", foreignConfig(t), other.FieldManager())
		e.seed("c1", foreignConfig(t), records.LegacyFieldManager) // applied before rollouts had managers of their own

		want := "ConfigMap demo/web-config in cluster c2 is managed by rollout team-b/web"
		err := e.svc.CheckOwners(ctx, e.spec, []string{"c1", "c2"})
		if err == nil || !strings.Contains(err.Error(), "Object Claimed By Two Owners") || !strings.Contains(err.Error(), want) ||
			strings.Contains(err.Error(), "cluster c1") {
			t.Fatalf("CheckOwners = %v, want a claim saying %q, and none on c1", err, want)
		}
		claims, err := e.svc.Claims(ctx, e.spec, []string{"c1", "c2"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) != 1 || claims[0] != (Claim{Cluster: "c2", Object: "ConfigMap demo/web-config", Owner: other}) {
			t.Fatalf("claims = %+v, want web-config on c2, held by %s (its records are in another record namespace)", claims, other)
		}
		if ignored, err := e.svc.Claims(ctx, e.spec, []string{"c2"}, func(k records.Key) bool { return k == other }); err != nil || len(ignored) != 0 {
			t.Errorf("claims of an ignored key = %+v, %v; want none", ignored, err)
		}

		// A cluster the run's check could not see: its provisioning refuses (a refused change,
		// not the revision's fault), and nothing is applied there.
		w := &world{svc: e.svc, spec: e.spec, logf: e.logf}
		w.engine = w.svc.engine.run(w)
		err = w.record(ctx, engine.Event{Kind: engine.EventProvisioning, Target: "c2", Revision: e.spec.Revision})
		if !errors.Is(err, engine.ErrChangeRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("provisioning c2: %v; want a refused change saying %q", err, want)
		}
		if st := e.load(e.clusters["c2"]); st.Provisioning != nil {
			t.Errorf("c2 records after the refusal: %s; want nothing in flight", describeState(st))
		}
		if err := w.record(ctx, engine.Event{Kind: engine.EventProvisioning, Target: "c1", Revision: e.spec.Revision}); err != nil {
			t.Errorf("provisioning c1 (the legacy manager's object is the rollout's to take): %v", err)
		}
		if st := e.load(e.clusters["c1"]); st.Provisioning == nil || len(st.Provisioning.Adopted) != 0 {
			t.Errorf("c1 records: %s, adopted %v; want provisioning, adopting nothing", describeState(st), st.Provisioning)
		}
	})
}

// TestOwnershipReadsEachClusterOnce: the plan's Ownership finds what Claims and Adoptions find,
// each alone, with one read of the live objects per cluster (they used to read them twice, and a
// plan runs twice per `apply`: the plan, and the CLI's plan again before applying).
func TestOwnershipReadsEachClusterOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startFresh, faults{}}, {"c2", startFresh, faults{}}})
		e.seed("c1", foreignConfig(t), "kubectl-client-side-apply") // someone else's: adopted
		other := records.Key{Kind: "module-assignment", Namespace: "fleet", Name: "addons.web"}
		if err := records.NewWorkloadStore(e.clusters["c2"].base, e.spec.RecordNamespace).MarkProvisioning(context.Background(), other,
			records.Revision{Revision: "abc123", Inventory: []records.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}}}); err != nil {
			t.Fatal(err)
		}
		ctx, clusters := context.Background(), []string{"c1", "c2"}
		claims, found, err := e.svc.Ownership(ctx, e.spec, clusters, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range clusters {
			if n := e.clusters[name].existing; n != 1 {
				t.Errorf("%s: the live objects were read %d times, want once", name, n)
			}
		}
		aloneClaims, err := e.svc.Claims(ctx, e.spec, clusters, nil)
		if err != nil {
			t.Fatal(err)
		}
		aloneFound, err := e.svc.Adoptions(ctx, e.spec, clusters)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(claims, aloneClaims) || len(claims) != 1 || claims[0].Cluster != "c2" {
			t.Errorf("claims = %+v, Claims alone %+v, want the Deployment on c2", claims, aloneClaims)
		}
		if len(found) != 1 || len(aloneFound) != 1 || found[0].Object != aloneFound[0].Object || found[0].Cluster != "c1" {
			t.Errorf("found = %+v, Adoptions alone %+v, want the ConfigMap on c1", found, aloneFound)
		}
	})
}
