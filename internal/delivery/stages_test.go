package delivery

import (
	"slices"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// stagedObservation is planObservation with Cluster labels: a and b in region eu, c in us.
func stagedObservation() *Observation {
	obs := planObservation()
	obs.Discovery = &fleet.Discovery{Clusters: []fleet.Cluster{
		{Name: "a", Labels: map[string]string{"region": "eu"}},
		{Name: "b", Labels: map[string]string{"region": "eu"}},
		{Name: "c", Labels: map[string]string{"region": "us"}},
	}}
	return obs
}

func stagedSpec(t *testing.T, until string, stages ...StageSpec) Spec {
	spec := planSpec(t, "r2", "1")
	spec.Stages = stages
	spec.Policy.PromoteUntil = until
	return spec
}

func TestDecideStages(t *testing.T) {
	two := engine.UpdateLimitOf(2)
	eu := StageSpec{Name: "eu", MatchLabels: map[string]string{"region": "eu"}, UpdateLimit: two}
	us := StageSpec{Name: "us", Names: []string{"c"}}
	t.Run("by labels and by names, each stage its waves", func(t *testing.T) {
		res := decide(stagedObservation(), PlanRequest{Spec: stagedSpec(t, "", eu, us)})
		if res.Refused != nil {
			t.Fatal(res.Refused.Err)
		}
		if want := [][]string{{"a", "b"}, {"c"}}; !slices.EqualFunc(res.Plan.Waves, want, slices.Equal) {
			t.Fatalf("waves %v, want %v", res.Plan.Waves, want)
		}
	})
	t.Run("promote_until eu: c waits", func(t *testing.T) {
		res := decide(stagedObservation(), PlanRequest{Spec: stagedSpec(t, "eu", eu, us)})
		if want := [][]string{{"a", "b"}}; !slices.EqualFunc(res.Plan.Waves, want, slices.Equal) || !slices.Equal(res.Changing, []string{"a", "b"}) {
			t.Fatalf("waves %v changing %v", res.Plan.Waves, res.Changing)
		}
		if got := res.Plan.StagesText(); got != "stops after stage eu: 1 cluster waits for stage us" {
			t.Errorf("StagesText %q", got)
		}
	})
	t.Run("a stage that picks no cluster: refused", func(t *testing.T) {
		typo := StageSpec{Name: "ap", MatchLabels: map[string]string{"region": "ap"}}
		res := decide(stagedObservation(), PlanRequest{Spec: stagedSpec(t, "", eu, typo, us)})
		if got := refusalTitle(res.Refused); got != "stages: Stage Picks No Cluster" || !strings.Contains(res.Refused.Err.Error(), "ap") {
			t.Fatalf("refused %q (%v)", got, res.Refused)
		}
	})
	t.Run("a cluster in no stage is left alone", func(t *testing.T) {
		res := decide(stagedObservation(), PlanRequest{Spec: stagedSpec(t, "", eu)})
		if got := res.Plan.StagesText(); got != "1 cluster in no stage is left alone" || slices.Contains(res.Changing, "c") {
			t.Fatalf("StagesText %q changing %v", got, res.Changing)
		}
	})
}

func TestWaiting(t *testing.T) {
	eu := StageSpec{Name: "eu", MatchLabels: map[string]string{"region": "eu"}}
	us := StageSpec{Name: "us", Names: []string{"c"}}
	obs := stagedObservation()
	obs.Discovery.Clusters = append(obs.Discovery.Clusters, fleet.Cluster{Name: "d"}, fleet.Cluster{Name: "e"})
	spec := stagedSpec(t, "eu", eu, us)
	spec.Policy.Canary = []string{"e"}
	got := spec.Waiting(obs.Discovery)
	if len(got) != 2 || !got["c"] || !got["d"] {
		t.Errorf("waiting %v, want c (stage us, after eu) and d (in no stage); e is a canary", got)
	}
	if got := stagedSpec(t, "").Waiting(obs.Discovery); got != nil {
		t.Errorf("without stages: %v", got)
	}
}
