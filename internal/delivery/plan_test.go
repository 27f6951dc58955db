package delivery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// planObservation is a fleet of three clusters, a and b on r1 and c on nothing, for decide.
func planObservation() *Observation {
	obs := &Observation{Clusters: map[string]ClusterState{}, Skipped: map[string]string{}}
	for _, t := range []engine.Target{
		{Name: "a", Record: engine.TargetRecord{Current: "r1"}},
		{Name: "b", Record: engine.TargetRecord{Current: "r1"}},
		{Name: "c"},
	} {
		obs.Targets = append(obs.Targets, t)
		obs.Clusters[t.Name] = ClusterState{Revision: t.Record.Current, State: StateCurrent}
	}
	return obs
}

func planSpec(t *testing.T, revision, updateLimit string) Spec {
	return Spec{Key: records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}, RecordNamespace: "gradual-system",
		Revision: revision, Policy: testPolicy(t, updateLimit, "0", engine.Rollback)}
}

func refusalTitle(r *Refusal) string {
	if r == nil {
		return ""
	}
	if e, ok := usererr.As(r.Err); ok {
		return r.Attribute + ": " + e.Summary
	}
	return r.Attribute + ": " + r.Err.Error()
}

// TestDecide: the decisions a plan makes from what the fleet says, with no cluster's answer:
// the waves, what comes from the prior state, and the refusals plan and apply share.
func TestDecide(t *testing.T) {
	lostContact := func(o *Observation) {
		o.LostContact, o.LostContactRevision = map[string]string{"a": "record write failed: failed calling webhook"}, "r2"
	}
	ledger := func(o *Observation) {
		o.Ledger = []InvalidRevision{{Revision: "r2", Reason: "verify: not ready", Clusters: []string{"x"}}}
	}
	cases := []struct {
		name    string
		obs     func(*Observation)
		req     func(*PlanRequest)
		refused string
		waves   [][]string
		leaving []string
		kept    bool
		state   bool
	}{
		{name: "every cluster in waves of update_limit", waves: [][]string{{"a", "b"}, {"c"}}},
		{name: "the last run lost contact with a: refused", obs: lostContact, refused: "manifests: Clusters Lost Contact After This Revision"},
		{name: "lost contact, retry_invalid: goes ahead", obs: lostContact, req: func(r *PlanRequest) { r.Spec.Retry = true },
			waves: [][]string{{"a", "b"}, {"c"}}},
		{name: "in the ledger, run nowhere: refused", obs: ledger, refused: "manifests: Revision Recorded Invalid"},
		{name: "in the ledger, runs on a: kept there, taken nowhere else",
			obs:  func(o *Observation) { ledger(o); o.Targets[0].Record.Current = "r2" },
			kept: true},
		{name: "from the prior state: its records and leaving, not the live ones", state: true,
			req: func(r *PlanRequest) {
				r.Prior = &Prior{Clusters: map[string]ClusterState{"a": {Revision: "r2", State: StateCurrent}, "b": {Revision: "r1", State: StateCurrent}},
					Skipped: map[string]string{"c": "not ready"}, Leaving: []string{"d"}}
			},
			waves: [][]string{{"b"}}, leaving: []string{"d"}},
		{name: "the prior state holds it invalid though the ledger was cleared: applied nowhere", state: true,
			req: func(r *PlanRequest) {
				r.Prior = &Prior{Clusters: map[string]ClusterState{"a": {Revision: "r1", State: StateCurrent}}, Invalid: []string{"r2"}}
			}},
		{name: "drift the refresh found repairs a current cluster",
			obs: func(o *Observation) {
				o.Targets[0].Record.Current, o.Targets[1].Record.Current, o.Targets[2].Record.Current = "r2", "r2", "r2"
			},
			req:   func(r *PlanRequest) { r.Drifted = map[string]bool{"b": true} },
			waves: [][]string{{"b"}}},
		{name: "a canary not in the first wave: refused",
			obs:     func(o *Observation) { o.Targets[2].SkipReason = "not ready" },
			req:     func(r *PlanRequest) { r.Spec.Policy.Canary = []string{"c"} },
			refused: "canary: Canary Not In The First Wave"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := planObservation()
			if tc.obs != nil {
				tc.obs(obs)
			}
			req := PlanRequest{Spec: planSpec(t, "r2", "2")}
			if tc.req != nil {
				tc.req(&req)
			}
			res := decide(obs, req)
			if got := refusalTitle(res.Refused); got != tc.refused {
				t.Fatalf("refused %q, want %q", got, tc.refused)
			}
			if tc.refused != "" {
				return
			}
			if !slices.EqualFunc(res.Plan.Waves, tc.waves, slices.Equal) && (len(res.Plan.Waves) != 0 || len(tc.waves) != 0) {
				t.Errorf("waves %v, want %v (notes %v)", res.Plan.Waves, tc.waves, res.Plan.Notes)
			}
			if res.FromState != tc.state || !slices.Equal(res.Leaving, tc.leaving) {
				t.Errorf("from state %v leaving %v, want %v %v", res.FromState, res.Leaving, tc.state, tc.leaving)
			}
			if (res.InvalidKept != nil) != tc.kept {
				t.Errorf("kept %v, want %v", res.InvalidKept, tc.kept)
			}
			var changing []string
			for _, w := range res.Plan.Waves {
				changing = append(changing, w...)
			}
			if !slices.Equal(res.Changing, changing) {
				t.Errorf("changing %v, want the waves' clusters %v", res.Changing, changing)
			}
		})
	}
}

// TestDecideChecksOnlyClustersStillOffered: a cluster the prior state planned that the fleet no
// longer offers (unreachable since the refresh) stays in the waves, which apply carries out
// and reports, but the plan does not ask it anything.
func TestDecideChecksOnlyClustersStillOffered(t *testing.T) {
	obs := planObservation()
	delete(obs.Clusters, "c")
	res := decide(obs, PlanRequest{Spec: planSpec(t, "r2", "100%"),
		Prior: &Prior{Clusters: map[string]ClusterState{"a": {Revision: "r1"}, "b": {Revision: "r1"}, "c": {}}}})
	if len(res.Plan.Waves) != 1 || len(res.Plan.Waves[0]) != 3 || !slices.Equal(res.Changing, []string{"a", "b"}) {
		t.Fatalf("waves %v changing %v: want a, b, c planned and a, b checked", res.Plan.Waves, res.Changing)
	}
}

// TestServicePlan: Plan reads the fake fleet once and says what apply would do, refusing with
// the same words apply uses: a revision in the ledger, and objects someone else made with
// adopt = false; adoptions are found otherwise.
func TestServicePlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startFresh, faults{}}})
		req := PlanRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}}
		res, err := e.svc.Plan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Refused != nil || res.FromState || !slices.Equal(res.Changing, []string{"c1", "c2"}) || len(res.Plan.Waves) != 2 {
			t.Fatalf("refused %v from state %v changing %v waves %v", res.Refused, res.FromState, res.Changing, res.Plan.Waves)
		}
		if len(res.Adoptions) != 0 {
			t.Fatalf("adoptions %v on a fleet where the rollout made everything", res.Adoptions)
		}

		e.seed("c2", foreignConfig(t), "kubectl-client-side-apply")
		res, err = e.svc.Plan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Refused != nil || len(res.Adoptions) != 1 || res.Adoptions[0].Cluster != "c2" {
			t.Fatalf("refused %v adoptions %+v: want web-config on c2 adopted", res.Refused, res.Adoptions)
		}
		req.RefuseAdoption = true
		if res, err = e.svc.Plan(ctx, req); err != nil || refusalTitle(res.Refused) != "adopt: Objects Exist Already" {
			t.Fatalf("adopt = false: refused %q, %v", refusalTitle(res.Refused), err)
		}

		if err := e.svc.managementStore(e.spec.RecordNamespace).RecordInvalid(ctx, e.spec.Key, records.InvalidEntry{
			Revision: e.spec.Revision, Reason: "verify: web not ready", Clusters: []string{"c9"}, RecordedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		res, err = e.svc.Plan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if refusalTitle(res.Refused) != "manifests: Revision Recorded Invalid" || !strings.Contains(res.Refused.Err.Error(), "c9") {
			t.Fatalf("refused %q: want the ledger's refusal naming c9", refusalTitle(res.Refused))
		}
		// Apply says the same.
		if _, err := e.svc.Run(ctx, RunRequest{Spec: e.spec, Query: req.Query}); err == nil || err.Error() != res.Refused.Err.Error() {
			t.Fatalf("apply: %v\nplan: %v", err, res.Refused.Err)
		}
	})
}
