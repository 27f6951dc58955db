package fleetupdate

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners/ownertest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
)

// clusterC discovers the fake management cluster's one Cluster, fleet/c.
type clusterC struct{}

func (clusterC) Discover(context.Context, fleet.Query) (*fleet.Discovery, error) {
	return &fleet.Discovery{Clusters: []fleet.Cluster{{Namespace: "fleet", Name: "c"}}}, nil
}

// Through the engine, with the real owners.Planner and ownerupdate.Updater over a fake management
// cluster (the path production takes): the cluster's MachineDeployment is written and nothing
// else, and the cluster is then current on the revision.
func TestApplyThroughTheOwnersWritesTheMachineDeploymentOnly(t *testing.T) {
	c, writes := ownertest.FleetClusterWorld(t, nil)
	planner := &owners.Planner{Client: c}
	svc := &Service{Fleet: clusterC{}, Planner: planner, Updater: &ownerupdate.Updater{Client: c, Reader: &owners.Reader{Client: c}}}
	spec := Spec{Query: fleet.Query{Namespace: "fleet", Names: []string{"c"}}, Owners: owners.Pick{MachineDeployments: labels.Everything()},
		Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone}
	spec.Policy = engine.Policy{Irreversible: true, OnFailure: engine.Halt, VerifyTimeout: 5 * time.Second}
	spec.Policy.UpdateLimit, _ = engine.ParseLimit("1")
	fp, err := planner.PlanFleet(t.Context(), spec.request([]string{"c"}))
	if err != nil {
		t.Fatal(err)
	}
	if fp.Cluster("c").Current(fp.Revision) {
		t.Fatal("cluster current before the change was written")
	}
	res, err := svc.Apply(context.Background(), ApplyRequest{Spec: spec, Exec: ownerupdate.ExecuteRequest{VerifyTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*writes, "; "); got != "patch MachineDeployment md-0" {
		t.Errorf("writes: %s; want only the MachineDeployment patched", got)
	}
	again, err := planner.PlanFleet(t.Context(), spec.request([]string{"c"}))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cluster("c").Current(again.Revision) {
		t.Errorf("cluster not current after the run: %+v", again.Cluster("c").Owners[0].Owner.Current.GetAnnotations())
	}
}
