package delivery

import (
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// A revision that failed on a cluster while the management cluster was unreachable has no
// ledger entry, only the cluster's record: the observation still lists it, so the next plan
// refuses it. A revision some cluster runs (a deliberate retry succeeded) is not resurrected.
func TestWithClusterFailures(t *testing.T) {
	targets := []engine.Target{
		{Name: "a", Record: engine.TargetRecord{Current: "r1", Invalid: map[string]string{"r2": "verify r2: not ready", "r0": "old"}}},
		{Name: "b", Record: engine.TargetRecord{Current: "r1", Invalid: map[string]string{"r2": "verify r2: not ready"}}},
		{Name: "c", Record: engine.TargetRecord{Current: "r0"}},
	}
	ledger := withClusterFailures([]InvalidRevision{{Revision: "r9", Reason: "x", Clusters: []string{"z"}}}, targets)
	if len(ledger) != 2 || ledger[0].Revision != "r9" || len(ledger[0].Clusters) != 1 {
		t.Fatalf("ledger %+v", ledger)
	}
	got := ledger[1]
	if got.Revision != "r2" || len(got.Clusters) != 2 || got.Clusters[0] != "a" || got.Clusters[1] != "b" {
		t.Fatalf("entry from the clusters' records: %+v", got)
	}
	obs := &Observation{Ledger: ledger}
	if _, ok := obs.Invalid("r2"); !ok {
		t.Fatal("r2 is not refused")
	}
	if _, ok := obs.Invalid("r0"); ok {
		t.Fatal("r0 runs on c: its old reason must not refuse it")
	}
	// A ledger that has the entry already is left as it is.
	again := withClusterFailures([]InvalidRevision{{Revision: "r2", Reason: "ledger", Clusters: []string{"a"}}}, targets)
	if len(again) != 1 || again[0].Reason != "ledger" || len(again[0].Clusters) != 1 {
		t.Fatalf("ledger changed: %+v", again)
	}
}

func TestLostContactRefusal(t *testing.T) {
	obs := &Observation{LostContact: map[string]string{"prod-eu-1": "verified, but its record could not be written: failed calling webhook"}, LostContactRevision: "r2"}
	if err := obs.LostContactRefusal("r2", "rollout fleet/web", false); err == nil {
		t.Fatal("not refused")
	}
	if err := obs.LostContactRefusal("r2", "rollout fleet/web", true); err != nil {
		t.Fatalf("retry_invalid: %v", err)
	}
	if err := obs.LostContactRefusal("r3", "rollout fleet/web", false); err != nil {
		t.Fatalf("another revision: %v", err)
	}
}

func TestPlannedLeaving(t *testing.T) {
	got := PlannedLeaving([]string{"a", "b", "c"}, []string{"c", "d", "a"})
	if len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("%v: want a, c (listed and still leaving)", got)
	}
	if got := PlannedLeaving(nil, []string{"a"}); len(got) != 0 {
		t.Fatalf("%v: nothing listed, nothing let go", got)
	}
}
