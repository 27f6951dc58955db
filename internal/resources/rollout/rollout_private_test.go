package rollout

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

func TestSummarize(t *testing.T) {
	obs := &delivery.Observation{
		Clusters: map[string]delivery.ClusterState{
			"a": {Revision: "r2", State: delivery.StateCurrent, Backup: "r1"},
			"b": {Revision: "r1", State: delivery.StateCurrent},
			"c": {Revision: "r2", State: delivery.StateDrifted, Drift: []string{"ConfigMap x/y: modified (.data.k)", "Deployment x/web: missing"}},
			"d": {State: delivery.StatePending},
			"e": {Revision: "r1", State: delivery.StateProvisioning},
			"g": {State: delivery.StateRecordsMissing, Drift: []string{"ConfigMap demo/web-config", "Deployment demo/web"}},
		},
		Skipped: map[string]string{"f": "control plane not ready"},
	}
	summary, attention := summarize("r2", obs, nil)
	want := map[string]int64{"current": 1, "outdated": 1, "drifted": 1, "pending": 1, "provisioning": 1, "skipped": 1, "records-missing": 1}
	if len(summary) != len(want) {
		t.Fatalf("summary %v, want %v", summary, want)
	}
	for k, v := range want {
		if summary[k] != v {
			t.Errorf("summary[%s] = %d, want %d", k, summary[k], v)
		}
	}
	if _, listed := attention["a"]; listed {
		t.Errorf("a is current on r2 but listed: %q", attention["a"])
	}
	if _, listed := attention["f"]; listed {
		t.Errorf("skipped f is listed in attention (it belongs in skipped): %q", attention["f"])
	}
	for name, parts := range map[string][]string{
		"b": {"outdated: ", "runs revision r1, not r2"},
		"c": {"drifted: ", "ConfigMap x/y: modified (.data.k); Deployment x/web: missing"},
		"d": {"pending: "},
		"e": {"provisioning: ", "revision r1"},
		"g": {"records missing: holds 2 objects of this rollout, e.g. ConfigMap demo/web-config", "held back", "adopt = true"},
	} {
		for _, p := range parts {
			if !strings.Contains(attention[name], p) {
				t.Errorf("attention[%s] = %q, want it to contain %q", name, attention[name], p)
			}
		}
	}
}

func TestAttentionBoundsDrift(t *testing.T) {
	var drift []string
	for _, o := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		drift = append(drift, "ConfigMap ns/"+o+": missing")
	}
	note := attentionNote("r", delivery.StateDrifted, delivery.ClusterState{Revision: "r", State: delivery.StateDrifted, Drift: drift})
	if !strings.HasSuffix(note, "and 2 more") || strings.Contains(note, "ns/f") {
		t.Errorf("note %q: want the first five objects and 'and 2 more'", note)
	}
}

// fakePrivate is the framework's private state as the rollout sees it.
type fakePrivate map[string][]byte

func (p fakePrivate) GetKey(_ context.Context, key string) ([]byte, diag.Diagnostics) {
	return p[key], nil
}
func (p fakePrivate) SetKey(_ context.Context, key string, value []byte) diag.Diagnostics {
	if len(value) == 0 {
		delete(p, key)
	} else {
		p[key] = value
	}
	return nil
}

func TestPrivateStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	store := fakePrivate{}
	var m Model
	m.private = privateState{
		Clusters: map[string]clusterRecord{"a": {Revision: "r1", State: "current", Backup: "r0"},
			"m": {State: delivery.StateRecordsMissing, Found: []string{"Deployment demo/web"}}},
		PlannedWaves: [][]string{{"a"}, {"b", "c"}},
	}
	if d := m.SavePrivate(ctx, store); d.HasError() {
		t.Fatal(d)
	}
	var back Model
	if d := back.LoadPrivate(ctx, store); d.HasError() {
		t.Fatal(d)
	}
	if !reflect.DeepEqual(back.private.Clusters, m.private.Clusters) || len(back.private.PlannedWaves) != 2 || back.private.PlannedWaves[1][1] != "c" {
		t.Errorf("round trip: %+v, want %+v", back.private, m.private)
	}
	// Carried out once: saving without planned waves removes them.
	back.private.PlannedWaves = nil
	if d := back.SavePrivate(ctx, store); d.HasError() {
		t.Fatal(d)
	}
	if _, ok := store[privateWavesKey]; ok {
		t.Errorf("planned waves still stored after they were carried out")
	}
	var again Model
	again.LoadPrivate(ctx, store)
	if again.private.PlannedWaves != nil || again.private.Clusters["a"].Revision != "r1" {
		t.Errorf("after clearing the waves: %+v", again.private)
	}
}

// Clusters waiting for a later stage are counted as waiting, not listed in attention; a waiting
// cluster already on the revision is current.
func TestSummarizeWaiting(t *testing.T) {
	obs := &delivery.Observation{Clusters: map[string]delivery.ClusterState{
		"a": {Revision: "r2", State: delivery.StateCurrent},
		"b": {Revision: "r1", State: delivery.StateCurrent},
		"c": {State: delivery.StatePending},
		"d": {Revision: "r2", State: delivery.StateCurrent},
	}}
	summary, attention := summarize("r2", obs, map[string]bool{"b": true, "c": true, "d": true})
	if summary["waiting"] != 2 || summary["current"] != 2 || len(attention) != 0 {
		t.Errorf("summary %v attention %v, want 2 waiting, 2 current, no attention", summary, attention)
	}
}
