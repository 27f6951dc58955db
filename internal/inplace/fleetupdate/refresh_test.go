package fleetupdate

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// fakeObserver answers the refresh: one owner per cluster, its recorded revision, and whether
// Cluster API is done with its machines.
// Clusters in topology are ClusterClass-built (their control plane selected through the
// topology), with the drift of their variables; driftErr fails reading them.
type fakeObserver struct {
	skip     map[string]string
	recorded map[string]string
	pending  map[string]bool
	topology map[string]bool
	drift    map[string][]owners.VariableChange
	driftErr error
	mu       sync.Mutex
	asked    []string
}

func (o *fakeObserver) ClusterOwners(_ context.Context, ns, cluster string, _ owners.Pick) ([]owners.Selection, string, error) {
	if r := o.skip[cluster]; r != "" {
		return nil, r, nil
	}
	if o.topology[cluster] {
		return []owners.Selection{{Namespace: ns, Cluster: cluster, ControlPlane: cluster + "-cp", Topology: true}}, "", nil
	}
	return []owners.Selection{{Namespace: ns, Cluster: cluster, MachineDeployment: cluster + "-md"}}, "", nil
}

func (o *fakeObserver) VariableDrift(_ context.Context, _, cluster string, _ map[string]json.RawMessage) ([]owners.VariableChange, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, cluster)
	return o.drift[cluster], o.driftErr
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
	svc := &Service{Fleet: f, Planner: f, Updater: f, Observer: obs}
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

// A topology variable set back on the Cluster since the apply (no machine need show it) is seen
// by the refresh: the cluster is not settled, and the plan from that state, with the same
// configuration, puts it in a wave again and names it with the variable, the Cluster's value and
// the configured one. A cluster the apply has not written yet is not compared; a selector's
// Cluster without a managed topology is recorded skipped; a Cluster that cannot be read fails
// the refresh.
func TestRefreshSeesVariablesSetBack(t *testing.T) {
	f := newFakeFleet("held", "setback", "plain", "older")
	f.noTopology = map[string]bool{"plain": true}
	spec := specOf("1", "0")
	spec.Change = inplace.Change{TopologyVariables: map[string]json.RawMessage{"note": json.RawMessage(`"b"`)}}
	rev := spec.Revision()
	f.recorded = map[string]string{"held": rev, "setback": rev, "older": "ip-older"}
	setBack := []owners.VariableChange{{Name: "note", From: `"a"`, To: `"b"`}}
	obs := &fakeObserver{recorded: map[string]string{"held": rev, "setback": rev, "older": "ip-older"},
		topology: map[string]bool{"held": true, "setback": true, "older": true},
		drift:    map[string][]owners.VariableChange{"setback": setBack, "older": setBack}}
	svc := &Service{Fleet: f, Planner: f, Updater: f, Observer: obs}
	got, err := svc.Refresh(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDrift := `topology variable note is "a" on the Cluster, want "b"`
	want := map[string]ClusterFacts{"held": {Recorded: rev, Settled: true}, "setback": {Recorded: rev, Drift: wantDrift},
		"plain": {Skip: owners.SkipNoTopology}, "older": {Recorded: "ip-older", Settled: true}}
	for n, w := range want {
		if got.Clusters[n] != w {
			t.Errorf("facts of %s: %+v, want %+v", n, got.Clusters[n], w)
		}
	}
	if slices.Contains(obs.asked, "older") || slices.Contains(obs.asked, "plain") {
		t.Errorf("variables compared on %v; want only the clusters the apply wrote", obs.asked)
	}

	p, err := svc.Plan(context.Background(), spec, &Prior{Revision: rev, Clusters: got.Clusters})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Drifted) != 1 || p.Drifted["setback"] != wantDrift {
		t.Errorf("drifted %v; want setback named: %s", p.Drifted, wantDrift)
	}
	if in := p.Plan.Intents["setback"]; in.Wave == 0 || p.Plan.Intents["held"].Wave != 0 || p.Skipped["plain"] != owners.SkipNoTopology {
		t.Errorf("plan from the refreshed state: intents %+v, skipped %v; want setback in a wave, held current, plain skipped", p.Plan.Intents, p.Skipped)
	}

	// The configuration changes the variables: the state's drift is no news.
	changed := spec
	changed.Change = inplace.Change{TopologyVariables: map[string]json.RawMessage{"note": json.RawMessage(`"c"`)}}
	if p, err := svc.Plan(context.Background(), changed, &Prior{Revision: rev, Clusters: got.Clusters}); err != nil || len(p.Drifted) != 0 {
		t.Errorf("plan of another change: drifted %v, %v; want none", p.Drifted, err)
	}

	obs.driftErr = errors.New("etcdserver: request timed out")
	if _, err := svc.Refresh(context.Background(), spec, nil); err == nil || !strings.Contains(err.Error(), "request timed out") {
		t.Errorf("refresh with the Cluster unreadable: %v; want the error", err)
	}
}

// With topology variables, clusters picked by selector that have no managed topology are
// skipped with the reason, the others planned; a canary that would be skipped so refuses the
// plan; a cluster named (names, cluster) is refused, not skipped, and the refresh does not
// record it skipped.
func TestSelectorSkipsClustersWithoutTopology(t *testing.T) {
	f := newFakeFleet("a", "b", "plain")
	f.noTopology = map[string]bool{"plain": true}
	spec := specOf("1", "0")
	spec.Change = inplace.Change{TopologyVariables: map[string]json.RawMessage{"note": json.RawMessage(`"b"`)}}
	svc := f.service()
	p, err := svc.Plan(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Skipped["plain"] != owners.SkipNoTopology || len(p.Plan.Waves) != 2 || slices.Contains(waveClusters(p.Plan), "plain") {
		t.Errorf("plan: waves %v, skipped %v; want a and b, plain skipped: %s", p.Plan.Waves, p.Skipped, owners.SkipNoTopology)
	}

	canary := specOf("1", "0", "plain")
	canary.Change = spec.Change
	if _, err := svc.Plan(context.Background(), canary, nil); !errors.Is(err, ErrCanary) || !strings.Contains(err.Error(), owners.SkipNoTopology) {
		t.Errorf("canary without a managed topology: %v; want refused (ErrCanary) with the reason", err)
	}

	named := spec
	named.Query.Names = []string{"a", "plain"}
	if _, err := svc.Plan(context.Background(), named, nil); err == nil || !strings.Contains(err.Error(), "Without A Managed Topology") {
		t.Errorf("plain named: %v; want refused", err)
	}
	obs := &fakeObserver{}
	got, err := (&Service{Fleet: f, Planner: f, Updater: f, Observer: obs}).Refresh(context.Background(), named, nil)
	if err != nil || got.Clusters["plain"].Skip != "" {
		t.Errorf("refresh of plain named: %+v, %v; want it not skipped (the plan refuses it)", got.Clusters["plain"], err)
	}
}
