package ownerupdate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// executeTopology writes the version to the Cluster's spec.topology (under the resourceVersion
// the plan read) and waits until the topology controller and Cluster API have brought the
// control plane and every MachineDeployment of results up to date. A blocked plan is refused
// before anything is written.
func (up *Updater) executeTopology(ctx context.Context, t *owners.Topology, results []*owners.PlanResult, req ExecuteRequest) (map[string]string, error) {
	status := map[string]string{}
	for _, res := range results {
		if err := res.Plan.Err(); err != nil {
			return status, engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, inplace.BlockedSummary, inplace.BlockedLead+"."))
		}
		for _, m := range res.Machines {
			status[m.Plan.Machine] = owners.StatusNotStarted
		}
	}
	if len(results) == 0 {
		return status, nil
	}
	if req.Holder != "" {
		var keys []records.Key
		for _, res := range results {
			keys = append(keys, LeaseKeys(res.Request.Selection, res.Machines)...)
		}
		slices.SortFunc(keys, func(a, b records.Key) int { return strings.Compare(a.String(), b.String()) })
		runCtx, release, err := up.holdLeases(ctx, slices.Compact(keys), req)
		if err != nil {
			return status, err
		}
		defer release()
		ctx = runCtx
	}
	revision := results[0].Revision
	if t.From != t.To || len(t.Variables) > 0 || t.Cluster.GetAnnotations()[owners.AnnotationRevision] != revision {
		if err := up.writeTopology(ctx, t, revision); err != nil {
			return status, err
		}
		req.Logf(fmt.Sprintf("wrote spec.topology.version %s%s to %s (revision %s); the topology controller rolls it out", t.To, variableNames(t.Variables), t.Name(), revision), nil)
	}
	st, err := up.waitTopology(ctx, t, results, req)
	maps.Copy(status, st)
	return status, err
}

// writeTopology merge-patches spec.topology.version, the topology variables (see patch) and the
// revision onto the Cluster, under the resourceVersion the plan read.
func (up *Updater) writeTopology(ctx context.Context, t *owners.Topology, revision string) error {
	u, raw, err := t.Patch(revision, true)
	if err != nil {
		return err
	}
	if err := records.Fenced(ctx); err != nil {
		return err // the Lease may be another apply's now: write nothing
	}
	if err := up.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, raw)); err != nil {
		if apierrors.IsConflict(err) {
			return engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, "Cluster Changed Since The Plan", t.Name()+" was changed after the plan read it; plan again."))
		}
		return usererr.Wrap(err, "Cannot Write Cluster", "Writing spec.topology to "+t.Name()+" failed.")
	}
	return nil
}

// variableNames is ", variables a, b" for the log, "" without variables.
func variableNames(vars []owners.VariableChange) string {
	if len(vars) == 0 {
		return ""
	}
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = v.Name
	}
	return " and variables " + strings.Join(names, ", ")
}

// waitTopology polls the Cluster, its owners, their machines and Nodes until the topology is
// reconciled at the version and every machine is up to date (owners.Reader.LookAtTopology),
// or VerifyTimeout passes; the error then names the Cluster and what the last look found wrong.
func (up *Updater) waitTopology(ctx context.Context, t *owners.Topology, results []*owners.PlanResult, req ExecuteRequest) (map[string]string, error) {
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	ctx, cancel := context.WithTimeout(ctx, req.VerifyTimeout)
	defer cancel()
	var lines []string
	var status map[string]string
	for {
		problems, st, err := up.Reader.LookAtTopology(ctx, t, results)
		if err == nil {
			lines, status = problems, st
			if len(problems) == 0 {
				return status, nil
			}
		} else {
			lines = append(slices.Clone(lines), err.Error())
		}
		if sleepErr := req.Clock.Sleep(ctx, 2*time.Second); sleepErr != nil {
			return failUnfinished(status), usererr.Wrap(notVerified(strings.Join(lines, "\n")), "In-Place Update Not Verified",
				fmt.Sprintf("%s: spec.topology.version is %s, but the topology controller and Cluster API did not bring the control plane and every MachineDeployment "+
					"up to date within %s (%v). They go on with it; look at what is named below (TopologyReconciled says what the topology controller waits for), then apply again to verify.",
					t.Name(), t.To, req.VerifyTimeout, context.Cause(ctx)))
		}
	}
}
