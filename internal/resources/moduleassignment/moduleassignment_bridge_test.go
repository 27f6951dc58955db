package moduleassignment

import (
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
)

// The plan's Bridge For Joiners warning: what the bridge hands out, what it moves to once
// verified, and each cluster it served since the last apply.
func TestBridgeText(t *testing.T) {
	spec := assignment.Spec{Modules: []assignment.Module{{Name: "cni", Revision: "c2"}, {Name: "policy", Revision: "p1"}}}
	v := &assignment.BridgeView{Name: "fleet/gradual.x.bridge", Exists: true, Revisions: map[string]string{"cni": "c1", "policy": "p1"},
		Joiners: []crsbridge.Joiner{
			{Cluster: "new-1", Modules: []crsbridge.Given{{Module: "cni", Revision: "c1", Applied: true}, {Module: "policy", Revision: "p1", Applied: true}}},
			{Cluster: "new-2", Modules: []crsbridge.Given{{Module: "cni"}}},
			{Cluster: "new-3"},
		},
		Left: []crsbridge.Joiner{{Cluster: "gone-1", Modules: []crsbridge.Given{{Module: "cni", Revision: "c1", Applied: true}}}}}
	got := bridgeText(v, spec)
	for _, want := range []string{
		"ClusterResourceSet fleet/gradual.x.bridge hands joiners: cni c1, policy p1.",
		"It moves to cni c2 once a cluster of this apply verifies it",
		"new-1: cni c1, policy p1",
		"new-2: cni (not applied yet: Cluster API retries)",
		"new-3: nothing yet: Cluster API waits for its control plane",
		"Left before an apply took them over",
		"gone-1: cni c1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if got := bridgeText(&assignment.BridgeView{Name: "fleet/b"}, assignment.Spec{}); !strings.HasPrefix(got, "Apply creates ClusterResourceSet fleet/b.") {
		t.Errorf("a bridge not there yet: %q", got)
	}
}
