package fleetupdate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
)

// fakeFleet is a fleet of clusters, each with one MachineDeployment of a few machines, and
// extensions whose answers the test changes: what the preview says is strategy; what the run
// writes is recorded, in order, with the wave the engine was in.
type fakeFleet struct {
	mu sync.Mutex
	// clusters: name → machines; picked: names the selector matches now.
	clusters map[string][]string
	picked   map[string]bool
	// strategy of every machine in the preview (default in-place); fallback none turns
	// rolling into blocked, as owners does.
	strategy map[string]inplace.Strategy
	fallback inplace.Fallback
	// recorded: owner revision by cluster; failing: clusters whose verification fails.
	recorded map[string]string
	failing  map[string]bool
	// noTopology: clusters without a managed topology, skipped or refused with topology
	// variables as owners.PlanFleet does.
	noTopology map[string]bool
	// afterApply runs after a cluster is written (to change the world mid-run).
	afterApply func(f *fakeFleet, cluster string)

	written               []string // clusters, in the order written
	inFlight, maxInFlight int
}

func newFakeFleet(names ...string) *fakeFleet {
	f := &fakeFleet{clusters: map[string][]string{}, picked: map[string]bool{}, strategy: map[string]inplace.Strategy{},
		recorded: map[string]string{}, failing: map[string]bool{}, fallback: inplace.FallbackNone}
	for _, n := range names {
		f.clusters[n] = []string{n + "-m1", n + "-m2"}
		f.picked[n] = true
	}
	return f
}

func (f *fakeFleet) Discover(_ context.Context, q fleet.Query) (*fleet.Discovery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := &fleet.Discovery{}
	for n := range f.clusters {
		if f.picked[n] {
			d.Clusters = append(d.Clusters, fleet.Cluster{Name: n, Namespace: q.Namespace})
		}
	}
	slices.SortFunc(d.Clusters, func(a, b fleet.Cluster) int { return cmpString(a.Name, b.Name) })
	return d, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fakeFleet) PlanFleet(_ context.Context, req owners.FleetRequest) (*owners.FleetPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &owners.FleetPlan{Revision: owners.Revision(req.Change)}
	names := slices.Sorted(slices.Values(req.Clusters))
	for _, n := range names {
		machines, ok := f.clusters[n]
		if !ok {
			return nil, fmt.Errorf("cluster %s: %w", n, apierrors.NewNotFound(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "clusters"}, n))
		}
		if f.noTopology[n] && len(req.Change.TopologyVariables) > 0 {
			if !req.SkipUnmanaged {
				return nil, fmt.Errorf("cluster %s: Topology Variables Without A Managed Topology", n)
			}
			out.Clusters = append(out.Clusters, &owners.ClusterPlan{Cluster: n, SkipReason: owners.SkipNoTopology})
			continue
		}
		owner := &unstructured.Unstructured{Object: map[string]any{}}
		owner.SetName(n + "-md")
		if r := f.recorded[n]; r != "" {
			owner.SetAnnotations(map[string]string{owners.AnnotationRevision: r})
		}
		res := &owners.PlanResult{Revision: out.Revision, Owner: &owners.Owner{Kind: "MachineDeployment", Current: owner}}
		for _, m := range machines {
			s := f.strategy[m]
			if s == "" {
				s = inplace.StrategyInPlace
			}
			if f.recorded[n] == out.Revision {
				s = inplace.StrategyUnchanged
			}
			if s == inplace.StrategyRolling && req.Fallback == inplace.FallbackNone {
				s = inplace.StrategyBlocked
			}
			res.Plan.Machines = append(res.Plan.Machines, inplace.MachinePlan{Machine: m, Strategy: s, Notes: []string{"no extension answers"}})
		}
		out.Clusters = append(out.Clusters, &owners.ClusterPlan{Cluster: n, Owners: []*owners.PlanResult{res}})
	}
	return out, nil
}

func (f *fakeFleet) ApplyCluster(_ context.Context, cp *owners.ClusterPlan, _ ownerupdate.ExecuteRequest) (map[string]string, error) {
	f.mu.Lock()
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	for _, r := range cp.Owners {
		for _, m := range r.Plan.Machines {
			if m.Strategy == inplace.StrategyRolling || m.Strategy == inplace.StrategyBlocked {
				f.mu.Unlock()
				panic(fmt.Sprintf("machine %s replaced: a write the plan did not show", m.Machine))
			}
		}
	}
	f.written = append(f.written, cp.Cluster)
	f.recorded[cp.Cluster] = cp.Owners[0].Revision
	after := f.afterApply
	f.mu.Unlock()
	time.Sleep(time.Millisecond) // let the wave's other clusters overlap
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	if after != nil {
		after(f, cp.Cluster)
	}
	return map[string]string{}, nil
}

func (f *fakeFleet) VerifyCluster(_ context.Context, cp *owners.ClusterPlan, _ ownerupdate.ExecuteRequest) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing[cp.Cluster] {
		return nil, engine.Mark(engine.ErrRevisionFailed, errors.New("machines not up to date in time"))
	}
	return nil, nil
}

func (f *fakeFleet) service() *Service { return &Service{Fleet: f, Planner: f, Updater: f} }

func (f *fakeFleet) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.written)
}

// priorOf is what a refresh of f records.
func (f *fakeFleet) priorOf() *Prior {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &Prior{Clusters: map[string]ClusterFacts{}}
	for n := range f.clusters {
		if f.picked[n] {
			p.Clusters[n] = ClusterFacts{Recorded: f.recorded[n], Settled: f.recorded[n] != ""}
		}
	}
	return p
}

func specOf(limit string, maxFailures string, canary ...string) Spec {
	s := Spec{Query: fleet.Query{Namespace: "fleet"}, Owners: owners.Pick{ControlPlane: true}, Change: inplace.Change{Version: "v1.34.2"},
		Fallback: inplace.FallbackNone}
	s.Policy = engine.Policy{Irreversible: true, OnFailure: engine.Halt, VerifyTimeout: time.Second, Canary: canary}
	s.Policy.UpdateLimit, _ = engine.ParseLimit(limit)
	s.Policy.MaxFailures, _ = engine.ParseMaxFailures(maxFailures)
	return s
}
