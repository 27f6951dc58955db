package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// Cluster gates (verify.cluster_gates): the cluster's own health, read before its wave starts
// (Held) and again each time the change is verified (Verify: after the apply and after the
// bake). The gate is the CAPI Cluster's Available condition in the management cluster and,
// delivering directly, every Node of the workload cluster (fleet.AvailableProblem, fleet.Nodes).
//
// Gates judge change, not state (blame.GateChange): the reading after the change is compared
// with the one before it, so that Nodes that join, are drained, replaced or lost during the wave
// (an autoscaler, a node repair, a spot interruption) are named in the run's warnings and not
// blamed on the revision. A cluster unhealthy before its change is held back with the reason
// (skipped, for a later apply), since whatever broke it was not this revision. A gate that
// cannot be read before the change holds nothing back, but is not silent: the run warns that
// the cluster went ungated, and why.

// gateReadTimeout bounds the read of a cluster's gate before its wave.
const gateReadTimeout = 10 * time.Second

// errGateUnread is a gate that was not read because the rollout has no gates or the service no
// reader; never returned out of this file.
var errGateUnread = errors.New("cluster gates off")

// readGate reads target's gate.
func (w *world) readGate(ctx context.Context, target string) (blame.GateReading, error) {
	if !w.spec.ClusterGates || w.svc.gate == nil {
		return blame.GateReading{}, errGateUnread
	}
	return w.engine.readGate(ctx, target)
}

// gateBefore reads target's gate before its wave: a reason to hold it back when it is unhealthy
// already, "" otherwise; a healthy reading is kept as the baseline that Verify compares with.
func (w *world) gateBefore(target string) string {
	// A context of its own (the engine's hook passes none): a cancelled run waits at most the bound.
	ctx, cancel := context.WithTimeout(context.Background(), gateReadTimeout)
	defer cancel()
	reading, err := w.readGate(ctx, target)
	switch {
	case errors.Is(err, errGateUnread):
		return ""
	case err != nil:
		w.gateNote(target, fmt.Sprintf("cluster gate not read before the change, so not checked after it: %v", firstLine(err.Error())))
		return ""
	}
	if problem := blame.GateBefore(reading, w.spec.GatePolicy); problem != "" {
		return "cluster gate: unhealthy before the change (" + problem + "), not blamed on the revision"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gated == nil {
		w.gated = map[string]blame.GateReading{}
	}
	w.gated[target] = reading
	return ""
}

// gateAfter reads target's gate again once its change is verified, when it was healthy before,
// and fails the revision when the difference is the revision's doing.
func (w *world) gateAfter(ctx context.Context, target string) error {
	w.mu.Lock()
	before, gated := w.gated[target]
	w.mu.Unlock()
	if !gated {
		return nil
	}
	return w.retry(ctx, target, func(ctx context.Context) error {
		after, err := w.readGate(ctx, target)
		if err != nil {
			return fmt.Errorf("read cluster gate: %w", err)
		}
		verdict, notes := blame.GateChange(before, after, w.spec.GatePolicy)
		for _, n := range notes {
			w.gateNote(target, "cluster gate: "+n)
		}
		if verdict.Class == blame.Revision {
			verdict = blame.Corroborate(verdict, w.untouchedGates(ctx))
		}
		switch verdict.Class {
		case blame.Revision:
			return engine.Mark(engine.ErrRevisionFailed, fmt.Errorf("%s: %s", verdict.Rule, verdict.Evidence))
		case blame.Infrastructure:
			return fmt.Errorf("%s: %s", verdict.Rule, verdict.Evidence) // retried, then unsettled: never the revision's
		}
		return nil
	})
}

// untouchedSample is how many clusters the revision has not reached a Node verdict is checked
// against: enough to tell a fleet-wide problem from one cluster's, few enough to keep the verify
// short.
const untouchedSample = 2

// untouchedOf is every cluster of plan's waves: none started yet.
func untouchedOf(plan engine.Plan) map[string]bool {
	out := map[string]bool{}
	for _, wave := range plan.Waves {
		for _, name := range wave {
			out[name] = true
		}
	}
	return out
}

// touch marks targets as reached by this run (their batch started).
func (w *world) touch(targets []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range targets {
		delete(w.untouched, t)
	}
}

// untouchedGates reads the gates of a few clusters this run has not reached (sorted by name, so a
// run asks the same ones) and says what each finds wrong now ("": healthy); a gate that cannot
// be read is left out, as it tells nothing either way.
func (w *world) untouchedGates(ctx context.Context) map[string]string {
	w.mu.Lock()
	names := sortedKeys(w.untouched)
	w.mu.Unlock()
	out := map[string]string{}
	for _, name := range names {
		if len(out) == untouchedSample {
			break
		}
		rctx, cancel := context.WithTimeout(ctx, gateReadTimeout)
		reading, err := w.readGate(rctx, name)
		cancel()
		if err == nil {
			out[name] = blame.GateBefore(reading, w.spec.GatePolicy)
		}
	}
	return out
}

// gateNote keeps what a gate saw but did not judge, for the run's warnings (RunResult.Gates).
func (w *world) gateNote(target, note string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := target + ": " + note
	if !slices.Contains(w.gateNotes, line) {
		w.gateNotes = append(w.gateNotes, line)
	}
}

// GateNotes lists what the gates saw and did not judge, in the order seen.
func (w *world) GateNotes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.gateNotes)
}

// clusterGate is the Service's gate reader: the Cluster's Available condition, then, when
// workload (delivering directly), every Node.
func (s *Service) clusterGate(ctx context.Context, namespace, name string, workload bool) (blame.GateReading, error) {
	problem, err := s.mgmt.AvailableProblem(ctx, namespace, name)
	if err != nil || problem != "" || !workload {
		return blame.GateReading{Available: problem}, err
	}
	c, err := s.dial(ctx, namespace, name, false)
	if err != nil {
		return blame.GateReading{}, err
	}
	nodes, err := fleet.Nodes(ctx, c.client)
	return blame.GateReading{Nodes: nodes, NodesRead: err == nil}, err
}
