package rollout

import (
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
)

// The plan's Bridge For Joiners warning on a rollout: what the bridge hands out, what it moves
// to once the fleet verifies it, and each cluster it served since the last apply.
func TestBridgeText(t *testing.T) {
	v := &crsbridge.View{Name: "fleet/gradual.x.bridge", Exists: true, Revisions: map[string]string{"revision": "r1"},
		Joiners: []crsbridge.Joiner{
			{Cluster: "new-1", Modules: []crsbridge.Given{{Module: "revision", Revision: "r1", Applied: true}}, Health: "healthy"},
			{Cluster: "new-2"},
		}}
	got := bridgeText(v, "r2")
	for _, want := range []string{
		"ClusterResourceSet fleet/gradual.x.bridge hands joiners: revision r1.",
		"It moves to revision r2 once every cluster of the rollout verifies it",
		"new-1: revision r1; healthy",
		"new-2: nothing yet: Cluster API waits for its control plane",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if got := bridgeText(v, "r1"); strings.Contains(got, "moves to") {
		t.Errorf("the bridge holds the configured revision, yet: %q", got)
	}
}
