package ownerupdate

import (
	"context"
	"maps"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// ApplyCluster writes the change to the owners of one planned cluster in order (the control
// plane first), each verified before the next is written. It returns every machine's status
// so far; its error is marked for the engine (see classify).
func (up *Updater) ApplyCluster(ctx context.Context, cp *owners.ClusterPlan, req ExecuteRequest) (map[string]string, error) {
	status := map[string]string{}
	direct := cp.Owners
	if cp.Topology != nil {
		if req.Logf == nil {
			req.Logf = func(string, map[string]any) {}
		}
		var viaTopology []*owners.PlanResult
		viaTopology, direct = splitTopology(cp)
		st, err := up.executeTopology(ctx, cp.Topology, viaTopology, req)
		maps.Copy(status, st)
		if err != nil {
			return status, classify(err)
		}
	}
	for _, res := range direct {
		exec, err := up.Execute(ctx, res, req)
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
func (up *Updater) VerifyCluster(ctx context.Context, cp *owners.ClusterPlan, req ExecuteRequest) (map[string]string, error) {
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	status := map[string]string{}
	direct := cp.Owners
	if cp.Topology != nil {
		var viaTopology []*owners.PlanResult
		viaTopology, direct = splitTopology(cp)
		st, err := up.waitTopology(ctx, cp.Topology, viaTopology, req)
		maps.Copy(status, st)
		if err != nil {
			return status, classify(err)
		}
	}
	for _, res := range direct {
		st, err := up.waitUpToDate(ctx, res, req)
		maps.Copy(status, st)
		if err != nil {
			return status, classify(err)
		}
	}
	return status, nil
}

// splitTopology parts cp's owners into those written through the Cluster's topology (first) and
// those written directly.
func splitTopology(cp *owners.ClusterPlan) (viaTopology, direct []*owners.PlanResult) {
	for _, r := range cp.Owners {
		if r.Request.Selection.Topology {
			viaTopology = append(viaTopology, r)
		} else {
			direct = append(direct, r)
		}
	}
	return viaTopology, direct
}

// classify marks an Execute error for the engine by its verdict (blame.Mark): a change Cluster
// API did not finish in time is the change's failure; refusals (blocked, the owner changed since
// the plan, a template name taken) are marked where they arise; anything else (API server
// unreachable, throttled, a Lease lost) says nothing about the change.
func classify(err error) error { return blame.Mark(err) }
