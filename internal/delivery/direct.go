package delivery

import (
	"context"
	"fmt"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// directEngine is the direct delivery engine (port.go): the provider applies each revision to
// each workload cluster itself, with server-side apply under the rollout's field manager, through
// the Cluster's kubeconfig Secret, and keeps each cluster's records in that cluster. Its other
// methods live beside what they serve: markUnrecorded (unrecorded.go), drifted (run.go),
// ownership and checkOwners (claims.go), preview (check.go), remove (destroy.go); its run's
// apply, verify, restore and records in world.go.
type directEngine struct{}

var _ deliveryEngine = directEngine{}

func (directEngine) discover(s *Service, ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
	return s.discover(ctx, q)
}

func (directEngine) goneReason(s *Service, ctx context.Context, namespace, name string) (string, error) {
	return s.goneReason(ctx, namespace, name, false)
}

// unread is nil: an unreadable cluster is that cluster's trouble (its own API server, its
// kubeconfig); it is skipped, shown in the plan, and the rest of the fleet goes on.
func (directEngine) unread(map[string]error) error { return nil }

// leftBehind is none: nothing of the rollout is left anywhere once a Cluster is deleted.
func (directEngine) leftBehind([]string, ...[]fleet.Cluster) []string { return nil }

// ready, checkPinned and pinned: a direct apply publishes nothing, and whatever keeps it from
// reaching a cluster is that cluster's, found when it is read.
func (directEngine) ready(*Service, context.Context) error             { return nil }
func (directEngine) checkPinned(*Service, context.Context, Spec) error { return nil }
func (directEngine) pinned(Spec) (*FluxArtifact, error)                { return nil, nil }

func (directEngine) run(w *world) engineRun { return directRun{w} }

// reader reads each cluster's records in the cluster itself; with drift, the current revision's
// objects too, compared with the live ones.
func (directEngine) reader(s *Service, _ context.Context, namespace string, key records.Key, recordNamespace string, _ []string) (clusterReader, error) {
	return func(ctx context.Context, name string, ignore apply.Ignore, drift, _ bool) (engine.TargetRecord, ClusterState, error) {
		c, err := s.cluster(ctx, namespace, name, key, false)
		if err != nil {
			return engine.TargetRecord{}, ClusterState{}, err
		}
		c = c.ignoring(ignore)
		store := records.NewWorkloadStore(c.client, recordNamespace)
		load := store.Summary // revisions and states only: enough to plan
		if drift {
			load = store.LoadCurrent // the current revision's objects too (only its), to compare with the live ones
		}
		state, err := load(ctx, key)
		if err != nil {
			return engine.TargetRecord{}, ClusterState{}, fmt.Errorf("read records: %w", err)
		}
		rec, st := clusterStateOf(state)
		st.empty = holdsNothing(state)
		if !drift || st.State != StateCurrent {
			return rec, st, nil
		}
		st.recorded = state.Current.Manifests
		set, err := manifest.FromCanonical(state.Current.Manifests)
		if err != nil {
			return rec, st, fmt.Errorf("current revision %s: %w", rec.Current, err)
		}
		drifts, err := c.applier.Drift(ctx, set.Objects)
		if err != nil {
			return rec, st, fmt.Errorf("check drift: %w", err)
		}
		for _, d := range drifts {
			st.Drift = append(st.Drift, d.String())
		}
		if len(st.Drift) > 0 {
			st.State = StateDrifted
		}
		return rec, st, nil
	}, nil
}

// directRun is the direct engine's part of one run: its apply, verify, restore and records are
// in world.go.
type directRun struct{ w *world }

func (directRun) start(context.Context) func() { return func() {} }
func (directRun) batch([]string)               {}
func (directRun) held(string) string           { return "" }

// changing reads target's kubeconfig Secret again at the next connection, so that a cluster
// deleted or re-keyed since the last read is seen before anything is applied.
func (r directRun) changing(target string) { r.w.svc.recheck(r.w.spec.ClusterNamespace, target) }

// readGate reads the Cluster's Available condition and the workload cluster's Nodes.
func (r directRun) readGate(ctx context.Context, target string) (blame.GateReading, error) {
	return r.w.svc.gate(ctx, r.w.spec.ClusterNamespace, target, true)
}

// fieldManager is the rollout's own (records.Key.FieldManager).
func (directEngine) fieldManager(key records.Key) string { return key.FieldManager() }

// inherit drops manager's entries from the objects the cluster's records hold (apply.Forget):
// what another engine applied there is the rollout's from now on, its next revision changes or
// drops those fields without a conflict, and what only the other engine set (Flux's labels and
// prune opt-out) stays, owned by no one, no drift of the rollout's.
func (directEngine) inherit(s *Service, ctx context.Context, spec Spec, name, manager string) error {
	c, err := s.cluster(ctx, spec.ClusterNamespace, name, spec.Key, spec.ForceConflicts)
	if err != nil {
		return err
	}
	state, err := records.NewWorkloadStore(c.client, spec.RecordNamespace).Load(ctx, spec.Key)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	return c.applier.Forget(ctx, previousInventory(state, ""), manager)
}
