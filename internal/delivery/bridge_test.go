package delivery

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// What decides the revision a rollout's bridge hands to joiners: the run's revision once every
// picked cluster verified it, else the one the bridge held, never one recorded invalid.
func TestRolloutBridgeRevision(t *testing.T) {
	on := func(rev string, st State) ClusterState { return ClusterState{Revision: rev, State: st} }
	cases := []struct {
		name     string
		revision string
		held     string
		after    *Observation
		want     string
		moved    bool
		whyHas   string
	}{
		{"the fleet verified it: the bridge starts with it", "r1", "",
			&Observation{Clusters: map[string]ClusterState{"a": on("r1", StateCurrent), "b": on("r1", StateDrifted)}}, "r1", true, ""},
		{"verified: the bridge moves to it in the same apply", "r2", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r2", StateCurrent), "b": on("r2", StateValuesChanged)}}, "r2", true, ""},
		{"already held: nothing to write", "r1", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r1", StateCurrent)}}, "r1", false, ""},
		{"in flight (a wave held back): joiners keep the last verified", "r2", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r2", StateCurrent), "b": on("r1", StateCurrent)}}, "r1", false,
			"r2 is in flight: 1 of 2 clusters are not on it, verified, yet (b); joiners get r1"},
		{"a cluster part-way through: in flight", "r2", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r2", StateProvisioning)}}, "r1", false, "in flight"},
		{"an unfinished run of it: in flight", "r2", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r2", StateCurrent)}, Interrupted: &Interruption{Revision: "r2"}}, "r1", false,
			"its last run did not finish"},
		{"recorded invalid: never handed out, even where it verified", "r2", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r2", StateCurrent)}, Ledger: []InvalidRevision{{Revision: "r2"}}}, "r1", false,
			"r2 is recorded invalid; joiners get r1"},
		{"the held revision recorded invalid since: the bridge carries nothing", "r2", "r1",
			&Observation{Clusters: map[string]ClusterState{"a": on("r1", StateCurrent)}, Ledger: []InvalidRevision{{Revision: "r1"}}}, "", false,
			"r1, which the bridge held, is recorded invalid"},
		{"no cluster yet: nothing carried", "r1", "", &Observation{}, "", false, "r1 is on no cluster yet"},
		{"the fleet not read after the run: kept", "r2", "r1", nil, "r1", false, "not read after the run"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := crsbridge.Decide([]crsbridge.Input{BridgeInput(tc.revision, tc.held, tc.after)})[0]
			if got.Revision != tc.want || got.Moved != tc.moved || !strings.Contains(got.Why, tc.whyHas) {
				t.Errorf("got %+v, want revision %q moved %v, why with %q", got, tc.want, tc.moved, tc.whyHas)
			}
		})
	}
}

func TestRolloutCheckBridge(t *testing.T) {
	set := func(yaml string) *manifest.Set {
		s, err := manifest.Parse(yaml)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	key := records.Key{Kind: "rollout", Namespace: "fleet", Name: "cni"}
	cm := set("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n")
	prod := fleet.Query{Namespace: "fleet", Selector: labels.SelectorFromSet(labels.Set{"env": "prod"})}
	cases := []struct {
		name string
		spec Spec
		q    fleet.Query
		want string
	}{
		{"bridgeable", Spec{Key: key, Objects: cm}, prod, ""},
		{"names", Spec{Key: key, Objects: cm}, fleet.Query{Names: []string{"x"}}, "by label only"},
		{"values", Spec{Key: key, Objects: cm, Values: &Values{}}, prod, "cannot render for a joiner"},
		{"sensitive", Spec{Key: key, Objects: cm, Sensitive: []string{"x"}}, prod, "in the clear"},
		{"secret", Spec{Key: key, Objects: set("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n")}, prod, "in the clear"},
		{"too big", Spec{Key: key, Objects: set("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: {k: " + strings.Repeat("x", 1<<20) + "}\n")}, prod,
			"the manifests: 1048"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBridge(tc.spec, tc.q)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}
