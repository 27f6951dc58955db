package delivery

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// BridgeModule is the one "module" of a rollout's bridge (internal/crsbridge): its ConfigMap
// holds the revision's objects, and a plan says "revision <digest>".
const BridgeModule = "revision"

// CheckBridge refuses, at plan, a rollout the bridge for joiners (follow_joins) cannot carry
// as the rollout delivers it: per-cluster values (ClusterResourceSet renders nothing), Secrets
// or sensitive values (a bridge ConfigMap would hold them in the clear), a selector Cluster
// API cannot use, and manifests too large for a ConfigMap. Nothing is read.
func CheckBridge(spec Spec, q fleet.Query) error {
	problems := crsbridge.TargetRefusals(q, spec.Values != nil)
	if why := crsbridge.Refusal("the manifests", "them into rollouts", spec.Key.FieldManager(), spec.Objects.Objects,
		len(spec.Sensitive) > 0 || len(spec.Redact) > 0); why != "" {
		problems = append(problems, why)
	}
	if len(problems) > 0 {
		return fmt.Errorf("follow_joins cannot bridge this rollout: %s", strings.Join(problems, "; "))
	}
	return nil
}

// BridgeInput is what decides the rollout's bridge after a run (crsbridge.Decide): the
// revision moves to the bridge once the fleet verified it, that is once every cluster the
// rollout picks (after, as the run left them) is on it, applied and verified, and no run of it
// is unfinished. A revision part of the fleet runs (a wave failed or held, a stage not promoted
// yet, clusters skipped for now are not counted) is in flight: joiners keep getting the one the
// bridge held. held is the revision the bridge holds ("" none).
func BridgeInput(revision, held string, after *Observation) crsbridge.Input {
	in := crsbridge.Input{Module: BridgeModule, Configured: revision, Held: held}
	if after == nil {
		in.Unverified = "is not verified: the fleet was not read after the run"
		return in
	}
	for _, inv := range after.Ledger {
		in.Invalid = append(in.Invalid, inv.Revision)
	}
	var behind []string
	for name, c := range after.Clusters {
		if c.Revision != revision || !verifiedState(c.State) {
			behind = append(behind, name)
		}
	}
	sort.Strings(behind)
	switch {
	case after.Interrupted != nil && after.Interrupted.Revision == revision:
		in.Unverified = "is in flight: its last run did not finish"
	case len(after.Clusters) == 0:
		in.Unverified = "is on no cluster yet"
	case len(behind) > 0:
		in.Unverified = fmt.Sprintf("is in flight: %d of %d clusters are not on it, verified, yet (%s)", len(behind), len(after.Clusters), shortNames(behind))
	default:
		in.Verified = true
	}
	return in
}

// verifiedState says a cluster on the revision holds it as applied and verified: drifted and
// values-changed clusters were verified on it too (drift is repaired, not a new revision).
func verifiedState(s State) bool {
	return s == StateCurrent || s == StateDrifted || s == StateValuesChanged
}

// UpdateBridge moves the rollout's bridge after a run (BridgeInput), with labels on its
// objects, and returns what it hands out now. Without follow_joins (on false) it removes it.
func (s *Service) UpdateBridge(ctx context.Context, spec Spec, q fleet.Query, on bool, labels map[string]string, after *Observation) (*crsbridge.Choice, error) {
	store := crsbridge.NewStore(s.ManagementClient())
	if !on {
		return nil, store.Delete(ctx, spec.Key, spec.ClusterNamespace)
	}
	b := crsbridge.Bridge{Key: spec.Key, Namespace: spec.ClusterNamespace, Selector: q.Selector, Labels: labels}
	inputs := func(held *crsbridge.Held) ([]crsbridge.Input, error) {
		return []crsbridge.Input{BridgeInput(spec.Revision, held.Revisions[BridgeModule], after)}, nil
	}
	objects := func(string) []*unstructured.Unstructured { return spec.Objects.Objects }
	choices, err := store.Move(ctx, b, inputs, objects, func(string) string { return spec.Key.FieldManager() })
	if err != nil || len(choices) == 0 {
		return nil, err
	}
	return &choices[0], nil
}

// ReadBridge reads the rollout's bridge and the joiners it served since the last apply: the
// clusters Cluster API gave the revision and whose records hold nothing of the rollout (obs,
// as the plan reads the fleet; nil at refresh: every cluster the bridge served). A joiner obs
// does not pick left.
func (s *Service) ReadBridge(ctx context.Context, spec Spec, obs *Observation) (*crsbridge.View, error) {
	members := func(cluster string) []string {
		if obs == nil {
			return nil
		}
		if c, ok := obs.Clusters[cluster]; ok && c.Revision != "" {
			return []string{BridgeModule}
		}
		return nil
	}
	var picked map[string]bool
	if obs != nil {
		picked = map[string]bool{}
		for name := range obs.Clusters {
			picked[name] = true
		}
		for name := range obs.Skipped {
			picked[name] = true
		}
	}
	ready := func(ctx context.Context, cluster string, objs []*unstructured.Unstructured) error {
		return s.ReadyNow(ctx, spec.ClusterNamespace, cluster, spec.Key, objs)
	}
	return crsbridge.NewStore(s.ManagementClient()).ViewOf(ctx, spec.Key, spec.ClusterNamespace, members, picked, ready)
}

// RemoveBridge removes the rollout's bridge (destroy).
func (s *Service) RemoveBridge(ctx context.Context, spec Spec) error {
	return crsbridge.NewStore(s.ManagementClient()).Delete(ctx, spec.Key, spec.ClusterNamespace)
}
