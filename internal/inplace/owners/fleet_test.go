package owners

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

// The owners of a cluster, in the order they are updated: the control plane its Cluster names,
// then the MachineDeployments the selector matches; a selector matching none skips the cluster.
func TestClusterOwners(t *testing.T) {
	c, _ := fleetWorld(t, nil)
	p := &Planner{Client: c}
	sels, skip, err := p.ClusterOwners(t.Context(), "fleet", "c", Owners{ControlPlane: true, MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "workers"})})
	if err != nil || skip != "" {
		t.Fatalf("err %v, skip %q", err, skip)
	}
	if len(sels) != 2 || sels[0].ControlPlane != "c-cp" || sels[1].MachineDeployment != "md-0" {
		t.Errorf("owners %+v; want control plane c-cp, then md-0", sels)
	}
	_, skip, err = p.ClusterOwners(t.Context(), "fleet", "c", Owners{MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "gpu"})})
	if err != nil || !strings.Contains(skip, "no MachineDeployment matches") {
		t.Errorf("err %v, skip %q; want skipped, no MachineDeployment matches", err, skip)
	}
}

// A fleet plan over a cluster whose MachineDeployment is paused skips that cluster with the
// reason instead of failing the whole plan.
func TestPlanFleetSkipsPausedOwner(t *testing.T) {
	c, _ := fleetWorld(t, map[string]string{pausedAnnotation: ""})
	p := &Planner{Client: c}
	fp, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Owners{MachineDeployments: labels.Everything()},
		Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if cp := fp.Cluster("c"); cp == nil || !strings.Contains(cp.SkipReason, "paused") || len(cp.Owners) != 0 {
		t.Errorf("cluster c: %+v; want skipped as paused", cp)
	}
}

// Through the engine: the cluster's MachineDeployment is written (and nothing else), the
// cluster is then current on the revision, and a second run changes nothing.
func TestFleetWorldThroughTheEngine(t *testing.T) {
	c, writes := fleetWorld(t, nil)
	p := &Planner{Client: c}
	req := FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Owners{MachineDeployments: labels.Everything()},
		Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone, Endpoints: nil}
	fp, err := p.PlanFleet(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if fp.Cluster("c").Current(fp.Revision) {
		t.Fatal("cluster current before the change was written")
	}
	policy := engine.Policy{Irreversible: true, VerifyTimeout: 5 * time.Second}
	plan := engine.PlanRollout([]engine.Target{{Name: "c"}}, fp.Revision, policy)
	w := &FleetWorld{Planner: p, Plan: fp, Exec: ExecuteRequest{VerifyTimeout: 5 * time.Second}}
	res := engine.Execute(context.Background(), plan, w, engine.SystemClock{}, policy)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*writes, "; "); got != "patch MachineDeployment md-0" {
		t.Errorf("writes: %s; want only the MachineDeployment patched", got)
	}
	again, err := p.PlanFleet(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cluster("c").Current(again.Revision) {
		t.Errorf("cluster not current after the run: %+v", again.Cluster("c").Owners[0].Owner.Current.GetAnnotations())
	}
}
