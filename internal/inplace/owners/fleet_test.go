package owners

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

// The owners of a cluster, in the order they are updated: the control plane its Cluster names,
// then the MachineDeployments the selector matches; a selector matching none skips the cluster.
func TestClusterOwners(t *testing.T) {
	c, _ := fleetWorld(t, nil)
	r := &Reader{Client: c}
	sels, skip, err := r.ClusterOwners(t.Context(), "fleet", "c", Pick{ControlPlane: true, MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "workers"})})
	if err != nil || skip != "" {
		t.Fatalf("err %v, skip %q", err, skip)
	}
	if len(sels) != 2 || sels[0].ControlPlane != "c-cp" || sels[1].MachineDeployment != "md-0" {
		t.Errorf("owners %+v; want control plane c-cp, then md-0", sels)
	}
	_, skip, err = r.ClusterOwners(t.Context(), "fleet", "c", Pick{MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "gpu"})})
	if err != nil || !strings.Contains(skip, "no MachineDeployment matches") {
		t.Errorf("err %v, skip %q; want skipped, no MachineDeployment matches", err, skip)
	}
}

// A fleet plan over a cluster whose MachineDeployment is paused skips that cluster with the
// reason instead of failing the whole plan.
func TestPlanFleetSkipsPausedOwner(t *testing.T) {
	c, _ := fleetWorld(t, map[string]string{pausedAnnotation: ""})
	p := &Planner{Client: c}
	fp, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Pick{MachineDeployments: labels.Everything()},
		Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if cp := fp.Cluster("c"); cp == nil || !strings.Contains(cp.SkipReason, "paused") || len(cp.Owners) != 0 {
		t.Errorf("cluster c: %+v; want skipped as paused", cp)
	}
}
