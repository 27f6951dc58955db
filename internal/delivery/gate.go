package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// Cluster gates (verify.cluster_gates): the cluster's own health, read before its wave starts
// (Held) and again each time the change is verified (Verify: after the apply and after the
// bake). The gate is the CAPI Cluster's Available condition in the management cluster and,
// delivering directly, the Ready condition of every Node of the workload cluster
// (fleet.AvailableProblem, fleet.NodesProblem).
//
// Only a cluster seen healthy before its change can fail its gate after it: that is a failure of
// the revision, restored and recorded like any other. A cluster unhealthy before its change is
// held back with the reason (skipped, for a later apply), since whatever broke it was not this
// revision, and changing a sick cluster would blame the revision for it. A gate that cannot be
// read before the change (an unreachable API server, credentials that may not list Nodes)
// holds nothing back and sets no baseline, so that cluster is not gated: its apply meets the
// same server and fails or goes through as it did without gates.

// gateReadTimeout bounds the read of a cluster's gate before its wave.
const gateReadTimeout = 10 * time.Second

// errGateUnread is a gate that was not read because the rollout has no gates or the service no
// reader; never returned out of this file.
var errGateUnread = errors.New("cluster gates off")

// readGate reads target's gate: "" when healthy, otherwise what is wrong.
func (w *world) readGate(ctx context.Context, target string) (string, error) {
	if !w.spec.ClusterGates || w.svc.gate == nil {
		return "", errGateUnread
	}
	return w.svc.gate(ctx, w.spec.ClusterNamespace, target, w.flux == nil)
}

// gateBefore reads target's gate before its wave: a reason to hold it back when it is unhealthy
// already, "" otherwise; a healthy one is remembered as the baseline that Verify holds it to.
func (w *world) gateBefore(target string) string {
	ctx, cancel := context.WithTimeout(context.Background(), gateReadTimeout)
	defer cancel()
	problem, err := w.readGate(ctx, target)
	switch {
	case err != nil:
		if !errors.Is(err, errGateUnread) {
			w.logf(fmt.Sprintf("%s: cluster gate not read before the change, so not checked after it: %v", target, firstLine(err.Error())), map[string]any{"cluster": target})
		}
		return ""
	case problem != "":
		return "cluster gate: unhealthy before the change (" + problem + "), not blamed on the revision"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gated == nil {
		w.gated = map[string]bool{}
	}
	w.gated[target] = true
	return ""
}

// gateAfter reads target's gate again once its change is verified, when it was healthy before:
// unhealthy now is a failure of the revision.
func (w *world) gateAfter(ctx context.Context, target string) error {
	w.mu.Lock()
	gated := w.gated[target]
	w.mu.Unlock()
	if !gated {
		return nil
	}
	return w.retry(ctx, target, func(ctx context.Context) error {
		problem, err := w.readGate(ctx, target)
		if err != nil {
			return fmt.Errorf("read cluster gate: %w", err)
		}
		if problem != "" {
			return engine.Mark(engine.ErrRevisionFailed, fmt.Errorf("cluster gate: %s (healthy before the change)", problem))
		}
		return nil
	})
}

// clusterGate is the Service's gate reader: the Cluster's Available condition, then, when
// workload (delivering directly), every Node's Ready condition.
func (s *Service) clusterGate(ctx context.Context, namespace, name string, workload bool) (string, error) {
	problem, err := s.mgmt.AvailableProblem(ctx, namespace, name)
	if err != nil || problem != "" || !workload {
		return problem, err
	}
	c, err := s.dial(ctx, namespace, name, false)
	if err != nil {
		return "", err
	}
	return fleet.NodesProblem(ctx, c.client)
}
