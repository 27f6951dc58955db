package owners

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// FleetWorld is the engine's World for an in-place update over a fleet: a target is a cluster.
// Apply writes the cluster's owners one after the other, the control plane first, each verified
// (Execute waits until Cluster API has brought it up to date) before the next is written; Verify
// looks at all of them again. The owners' AnnotationRevision is the record, so Record writes
// nothing, and nothing is restored (run it with engine.Policy.Irreversible).
type FleetWorld struct {
	Planner *Planner
	Plan    *FleetPlan
	// Exec is passed to Execute for every owner (verify timeout, Lease holder, logging).
	Exec ExecuteRequest

	mu     sync.Mutex
	status map[string]string
}

var _ engine.World = (*FleetWorld)(nil)

// Status is every machine's status (see the Status constants) after the run, by machine name.
func (w *FleetWorld) Status() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.status)
}

func (w *FleetWorld) note(st map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == nil {
		w.status = map[string]string{}
	}
	maps.Copy(w.status, st)
}

// Apply writes the change to the cluster's owners in order, waiting for each.
func (w *FleetWorld) Apply(ctx context.Context, cluster, _ string) error {
	cp := w.Plan.Cluster(cluster)
	if cp == nil {
		return engine.Mark(engine.ErrChangeRefused, fmt.Errorf("cluster %s is not in the plan", cluster))
	}
	st, err := w.Planner.ApplyCluster(ctx, cp, w.Exec)
	w.note(st)
	return err
}

// Verify waits (within ctx, which carries the verify timeout) until every owner of the cluster
// and its machines are up to date again: the control plane may have changed while the
// MachineDeployments rolled out.
func (w *FleetWorld) Verify(ctx context.Context, cluster, _ string) error {
	cp := w.Plan.Cluster(cluster)
	if cp == nil {
		return engine.Mark(engine.ErrChangeRefused, fmt.Errorf("cluster %s is not in the plan", cluster))
	}
	st, err := w.Planner.VerifyCluster(ctx, cp, w.Exec)
	w.note(st)
	return err
}

// ApplyCluster writes the change to the owners of one planned cluster in order (the control
// plane first), each verified before the next is written. It returns every machine's status
// so far; its error is marked for the engine (see classify).
func (p *Planner) ApplyCluster(ctx context.Context, cp *ClusterPlan, req ExecuteRequest) (map[string]string, error) {
	status := map[string]string{}
	direct := cp.Owners
	if cp.Topology != nil {
		if req.Logf == nil {
			req.Logf = func(string, map[string]any) {}
		}
		var viaTopology []*Result
		viaTopology, direct = splitTopology(cp)
		st, err := p.executeTopology(ctx, cp.Topology, viaTopology, req)
		maps.Copy(status, st)
		if err != nil {
			return status, classify(err)
		}
	}
	for _, res := range direct {
		exec, err := p.Execute(ctx, res, req)
		if exec != nil {
			maps.Copy(status, exec.Status)
		}
		if err != nil {
			return status, classify(err)
		}
	}
	return status, nil
}

// VerifyCluster waits (within ctx) until every owner of the planned cluster and its machines
// are up to date; its error is marked for the engine (see classify).
func (p *Planner) VerifyCluster(ctx context.Context, cp *ClusterPlan, req ExecuteRequest) (map[string]string, error) {
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	status := map[string]string{}
	direct := cp.Owners
	if cp.Topology != nil {
		var viaTopology []*Result
		viaTopology, direct = splitTopology(cp)
		st, err := p.waitTopology(ctx, cp.Topology, viaTopology, req)
		maps.Copy(status, st)
		if err != nil {
			return status, classify(err)
		}
	}
	for _, res := range direct {
		st, err := p.waitUpToDate(ctx, res, req)
		maps.Copy(status, st)
		if err != nil {
			return status, classify(err)
		}
	}
	return status, nil
}

// Restore is never called for an irreversible change; it refuses, so that a misconfigured
// policy cannot pass for a restore.
func (w *FleetWorld) Restore(context.Context, string, string) error {
	return errors.New("in-place updates are not restored (engine.Policy.Irreversible)")
}

// Record keeps nothing: the owners' annotations are the record.
func (w *FleetWorld) Record(context.Context, engine.Event) error { return nil }

// classify marks an Execute error for the engine: a change Cluster API did not finish in time is
// the change's failure; a change refused before anything was written (blocked, the owner changed
// since the plan, a template name taken) is refused; anything else (API server unreachable,
// throttled, a Lease lost) says nothing about the change.
func classify(err error) error {
	if errors.Is(err, ErrNotVerified) {
		return engine.Mark(engine.ErrRevisionFailed, err)
	}
	return err // refusals (blocked, owner changed, template name taken) are marked where they arise
}
