package delivery

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Records missing. A cluster's records are what says which revision runs there and which
// objects the rollout made; with them gone (the record namespace deleted by a cleanup, the
// cluster restored from a backup taken without it) the cluster reads, from the records alone,
// as one nothing ever ran on. A failing revision would then be restored to nothing, which
// deletes every object of the bundle that the rollout's field manager holds: what ran before.
//
// So a cluster whose records hold nothing of the rollout is asked, before anything is decided
// about it, whether objects of the bundle are there under the rollout's own field manager
// (records.Key.FieldManager): objects only this rollout can have put there. The legacy field
// manager every rollout shared is not evidence: deletion_policy = "orphan" hands objects to it
// on purpose, for whichever rollout applies them next. If so, what runs there is unknown, not nothing: the cluster reads as
// StateRecordsMissing, with what was found, and no apply changes it (it is skipped with that
// reason, so nothing there is pruned, deleted or restored to nothing) until the user chooses.
// The choice is `adopt = true` written in the configuration (Spec.AdoptUnrecorded): the objects
// are taken over as pre-existing, recorded adopted with their content as found, so a failing
// revision puts them back as they were instead of deleting them, and prune and destroy give
// them back rather than delete them. Flux mode keeps the records in the management cluster,
// so a workload cluster's record namespace does not hold them and is not checked; there the
// evidence is the rollout's Kustomization for the cluster, still there when the cluster's
// records in the management cluster are gone (fluxEngine.fluxUnrecorded).

// holdsNothing reports whether state has no readable record of the rollout.
func holdsNothing(state *records.State) bool {
	return state.Current == nil && state.Backup == nil && state.Provisioning == nil && len(state.Invalid) == 0 && len(state.Superseded) == 0
}

// ownObjects lists the objects of found that the field manager own manages, sorted: on a
// cluster whose records hold nothing, objects of the rollout whose records are gone.
func ownObjects(found []apply.Existing, own string) []string {
	var out []string
	for _, e := range found {
		if slices.Contains(e.Managers, own) {
			out = append(out, e.Object.String())
		}
	}
	slices.Sort(out)
	return out
}

// RecordsMissingReason is the one wording of a records-missing cluster, from the objects found
// there: the note the plan's `attention` shows and the reason the cluster is held back with.
func RecordsMissingReason(found []string) string {
	what := "objects of this rollout"
	if len(found) > 0 {
		what = fmt.Sprintf("%s of this rollout, e.g. %s", countNoun(len(found), "object", "objects"), found[0])
	}
	return "records missing: holds " + what + " under its field manager (through Flux: in its Kustomization's inventory), but " +
		"no record of it (its records were deleted, or the cluster restored without them), so what runs there is unknown; held back: nothing is applied, pruned " +
		"or deleted there until adopt = true is set in the configuration, which takes them over as pre-existing (a failed " +
		"revision then puts them back as they are now)"
}

// unrecorded reads, on each of names (clusters whose records hold nothing of the rollout), which
// objects of the bundle (objectsFor) are there under the rollout's field manager. found holds
// the clusters where some are; failed, those that could not be read.
func (s *Service) unrecorded(ctx context.Context, namespace string, key records.Key, names []string,
	objectsFor func(string) ([]*unstructured.Unstructured, error)) (found map[string][]string, failed map[string]error) {
	var mu sync.Mutex
	found = map[string][]string{}
	failed = s.forEach(ctx, names, func(ctx context.Context, name string) error {
		objs, err := objectsFor(name)
		if err != nil || len(objs) == 0 {
			return err
		}
		c, err := s.cluster(ctx, namespace, name, key, false)
		if err != nil {
			return err
		}
		existing, err := c.applier.Existing(ctx, objs)
		if err != nil {
			return fmt.Errorf("read which objects of the rollout exist: %w", err)
		}
		if own := ownObjects(existing, c.manager); len(own) > 0 {
			mu.Lock()
			found[name] = own
			mu.Unlock()
		}
		return nil
	})
	return found, failed
}

// markUnrecorded checks obs's clusters whose records hold nothing (see unrecorded) and marks
// those holding objects of the rollout StateRecordsMissing, with what was found; those that
// could not be read are skipped, as Observe skips a cluster it cannot read. placedOnly limits
// the check to the clusters earlier runs changed (obs.Placed): a refresh reads no objects of a
// cluster the rollout never reached (one waiting for a later stage), while plan and apply, which
// decide what to change, check every cluster whose records hold nothing. Flux mode checks
// no workload cluster (its records are not there): its reader marks them (fluxUnrecorded).
func (s *Service) markUnrecorded(ctx context.Context, namespace string, key records.Key, obs *Observation, placedOnly bool,
	objectsFor func(string) ([]*unstructured.Unstructured, error)) {
	s.engine.markUnrecorded(s, ctx, namespace, key, obs, placedOnly, objectsFor)
}

// markUnrecorded is Service.markUnrecorded delivering directly.
func (directEngine) markUnrecorded(s *Service, ctx context.Context, namespace string, key records.Key, obs *Observation, placedOnly bool,
	objectsFor func(string) ([]*unstructured.Unstructured, error)) {
	var names []string
	for _, name := range sortedKeys(obs.Clusters) {
		if obs.Clusters[name].empty && (!placedOnly || slices.Contains(obs.Placed, name)) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	found, failed := s.unrecorded(ctx, namespace, key, names, objectsFor)
	for name, objs := range found {
		st := obs.Clusters[name]
		st.State, st.Drift, st.empty = StateRecordsMissing, objs, false
		obs.Clusters[name] = st
	}
	for name, err := range failed {
		reason := "cannot read the cluster: " + firstLine(err.Error())
		delete(obs.Clusters, name)
		obs.Skipped[name] = reason
		for i := range obs.Targets {
			if obs.Targets[i].Name == name {
				obs.Targets[i].SkipReason = reason
			}
		}
	}
}

// MarkUnrecorded is the check Plan makes (markUnrecorded, every cluster whose records hold
// nothing) for a plan made outside Plan: a module assignment plans each module from an
// Observe that reads no objects, and must hold back the same clusters the module's Run will.
// spec's objects must be rendered (Spec.Render) when it has values.
func (s *Service) MarkUnrecorded(ctx context.Context, spec Spec, obs *Observation) {
	s.markUnrecorded(ctx, spec.ClusterNamespace, spec.Key, obs, false, spec.ObjectsFor)
}

// HoldUnrecorded returns targets with the clusters that clusters reads records-missing held
// back (skipped, with the reason), unless adopt (Spec.AdoptUnrecorded) takes their objects over.
// Plan and apply hold them back in the same words, from the live records or from a state.
func HoldUnrecorded(targets []engine.Target, clusters map[string]ClusterState, adopt bool) []engine.Target {
	if adopt {
		return targets
	}
	out := slices.Clone(targets)
	for i, t := range out {
		if st, ok := clusters[t.Name]; ok && st.State == StateRecordsMissing && t.SkipReason == "" {
			out[i].SkipReason = RecordsMissingReason(st.Drift)
		}
	}
	return out
}

// RecordsMissing lists the clusters obs reads records-missing, with the reason, for a plan's
// warning ("cluster: reason").
func (o *Observation) RecordsMissing() map[string]string {
	out := map[string]string{}
	for name, st := range o.Clusters {
		if st.State == StateRecordsMissing {
			out[name] = RecordsMissingReason(st.Drift)
		}
	}
	return out
}

// renderer is what r's bundle is for cluster c: rendered with c's variables when r has values,
// the template itself otherwise.
func (r *Rendering) renderer(c fleet.Cluster) func() (*manifest.Set, error) {
	if r.Values == nil {
		return func() (*manifest.Set, error) { return r.Template, nil }
	}
	vars := r.Values.For(c)
	return func() (*manifest.Set, error) { return manifest.Substitute(r.Template, vars) }
}

// objectsOf is markUnrecorded's objectsFor over rendering (by cluster name).
func objectsOf(rendering map[string]func() (*manifest.Set, error)) func(string) ([]*unstructured.Unstructured, error) {
	return func(name string) ([]*unstructured.Unstructured, error) {
		render, ok := rendering[name]
		if !ok {
			return nil, nil
		}
		set, err := render()
		if err != nil || set == nil {
			return nil, err
		}
		return set.Objects, nil
	}
}
