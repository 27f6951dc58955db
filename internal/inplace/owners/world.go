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
	for _, res := range cp.Owners {
		exec, err := w.Planner.Execute(ctx, res, w.Exec)
		if exec != nil {
			w.note(exec.Status)
		}
		if err != nil {
			return classify(err)
		}
	}
	return nil
}

// Verify waits (within ctx, which carries the verify timeout) until every owner of the cluster
// and its machines are up to date again: the control plane may have changed while the
// MachineDeployments rolled out.
func (w *FleetWorld) Verify(ctx context.Context, cluster, _ string) error {
	cp := w.Plan.Cluster(cluster)
	if cp == nil {
		return engine.Mark(engine.ErrChangeRefused, fmt.Errorf("cluster %s is not in the plan", cluster))
	}
	req := w.Exec
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	for _, res := range cp.Owners {
		st, err := w.Planner.waitUpToDate(ctx, res, req)
		if st != nil {
			w.note(st)
		}
		if err != nil {
			return classify(err)
		}
	}
	return nil
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
