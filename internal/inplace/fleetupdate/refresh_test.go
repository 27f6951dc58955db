package fleetupdate

import (
	"context"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// fakeObserver answers the refresh: one owner per cluster, its recorded revision, and whether
// Cluster API is done with its machines.
type fakeObserver struct {
	skip     map[string]string
	recorded map[string]string
	pending  map[string]bool
}

func (o *fakeObserver) ClusterOwners(_ context.Context, ns, cluster string, _ owners.Owners) ([]owners.Selection, string, error) {
	if r := o.skip[cluster]; r != "" {
		return nil, r, nil
	}
	return []owners.Selection{{Namespace: ns, Cluster: cluster, MachineDeployment: cluster + "-md"}}, "", nil
}

func (o *fakeObserver) Observe(_ context.Context, sel owners.Selection, _ inplace.Change) (*owners.Observation, error) {
	m := owners.Observed{Machine: sel.Cluster + "-m1"}
	if o.pending[sel.Cluster] {
		m.Pending = "not UpToDate"
	}
	return &owners.Observation{OwnerRevision: o.recorded[sel.Cluster], Machines: []owners.Observed{m}}, nil
}

// The refresh records what the next plan cuts its waves from: a cluster done with the revision
// is current, one written but not done is resumed, one that cannot be updated is skipped.
func TestRefreshFactsPlanTheNextWaves(t *testing.T) {
	f := newFakeFleet("done", "written", "fresh", "paused")
	spec := specOf("1", "0")
	rev := spec.Revision()
	obs := &fakeObserver{skip: map[string]string{"paused": "MachineDeployment paused"},
		recorded: map[string]string{"done": rev, "written": rev}, pending: map[string]bool{"written": true}}
	svc := &Service{Fleet: f, Machines: f, Observer: obs}
	got, err := svc.Refresh(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ClusterFacts{"done": {Recorded: rev, Settled: true}, "written": {Recorded: rev}, "fresh": {}, "paused": {Skip: "MachineDeployment paused"}}
	for n, w := range want {
		if got.Clusters[n] != w {
			t.Errorf("facts of %s: %+v, want %+v", n, got.Clusters[n], w)
		}
	}
	p, err := svc.Plan(context.Background(), spec, &Prior{Revision: rev, Clusters: got.Clusters})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Plan.Waves) != 2 || p.Plan.Intents["done"].Wave != 0 || p.Plan.Intents["written"].Provisioning != rev || p.Skipped["paused"] == "" {
		t.Fatalf("plan from the refreshed facts: waves %v, intents %+v", p.Plan.Waves, p.Plan.Intents)
	}
}
