package delivery

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// DestroyRequest removes a rollout.
type DestroyRequest struct {
	Spec  Spec
	Query fleet.Query
	// Orphan leaves the applied objects in the clusters and removes only the records.
	Orphan bool
	// KeepManagementRecords leaves the management cluster's progress record and ledger: the
	// rollout goes on elsewhere, only the picked clusters are let go.
	KeepManagementRecords bool
	Logf                  func(msg string, fields map[string]any)
	// Adopted, when set, receives what each cluster gave back of the objects the rollout
	// adopted (see giveBack); otherwise that is among the returned warnings.
	Adopted func(note string)
}

// Destroy removes what the rollout applied from every picked cluster it can reach, in waves of
// at most update_limit clusters, then the records. Clusters it cannot reach keep their objects
// and records; they are named in the returned warnings.
func (s *Service) Destroy(ctx context.Context, req DestroyRequest) (warnings []string, err error) {
	spec := req.Spec
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	runCtx, release, err := s.HoldLease(ctx, spec.RecordNamespace, spec.Key, records.HolderIdentity(), "Rollout Busy",
		"Another apply of "+spec.Key.Describe()+" holds its Lease; destroy once it is done.")
	if err != nil {
		return nil, err
	}
	defer release()
	ctx = runCtx

	found, err := s.fleetOf(ctx, req.Query)
	if err != nil {
		return nil, err
	}
	var gone []string
	if !req.KeepManagementRecords {
		// The clusters that left the selector since the last apply hold objects too, and through
		// Flux so do the deleted ones (fluxGone).
		if found, gone, err = s.withPlaced(ctx, spec, req.Query.Namespace, found); err != nil {
			return nil, err
		}
	}
	var reachable []string
	for _, c := range found.Clusters {
		if c.Eligible() {
			reachable = append(reachable, c.Name)
		} else {
			warnings = append(warnings, fmt.Sprintf("%s: %s; its objects and records of %s are left in place", c.Name, c.SkipReason, spec.Key.Describe()))
		}
	}
	reachable = append(reachable, gone...)
	failed, notes := s.removeFrom(ctx, spec, reachable, req.Orphan, req.Logf)
	var failures []string
	for _, name := range sortedKeys(failed) {
		failures = append(failures, fmt.Sprintf("%s: %v", name, failed[name]))
	}
	for _, name := range sortedKeys(notes) {
		if req.Adopted != nil {
			req.Adopted(notes[name])
		} else {
			warnings = append(warnings, notes[name])
		}
	}
	if len(failures) > 0 {
		sort.Strings(failures)
		return warnings, usererr.New("Rollout Delete Incomplete",
			"These clusters still hold objects or records of "+spec.Key.Describe()+":\n  "+strings.Join(failures, "\n  ")+"\nRun destroy again once they are reachable.")
	}
	if req.KeepManagementRecords {
		return warnings, nil
	}
	if err := s.managementStore(spec.RecordNamespace).Delete(ctx, spec.Key); err != nil {
		return warnings, fmt.Errorf("delete the management records of %s: %w", spec.Key.Describe(), err)
	}
	return warnings, nil
}

// withPlaced adds to found the clusters the progress record says earlier runs changed and that
// found does not hold; gone are those of them whose Cluster was deleted that still hold
// something to remove (leftBehind).
func (s *Service) withPlaced(ctx context.Context, spec Spec, namespace string, found *fleet.Discovery) (_ *fleet.Discovery, gone []string, err error) {
	progress, err := s.managementStore(spec.RecordNamespace).LoadProgress(ctx, spec.Key)
	if err != nil || progress == nil {
		return found, nil, err
	}
	more, err := s.placedElsewhere(ctx, namespace, progress.Placed, found.Clusters)
	if err != nil {
		return nil, nil, err
	}
	out := *found
	out.Clusters = append(slices.Clone(found.Clusters), more...)
	return &out, s.engine.leftBehind(progress.Placed, found.Clusters, more), nil
}

// removeFrom removes the rollout from clusters, in waves of at most update_limit: the objects
// it made are deleted (kept with orphan), those it adopted given back, and the records go.
// failed says why, by cluster, where that did not complete; notes say, by cluster, which
// adopted objects were given back.
func (s *Service) removeFrom(ctx context.Context, spec Spec, clusters []string, orphan bool, logf func(string, map[string]any)) (failed map[string]error, notes map[string]string) {
	failed, notes = map[string]error{}, map[string]string{}
	size := spec.Policy.UpdateLimit.Resolve(len(clusters))
	for start, wave := 0, 1; start < len(clusters); start, wave = start+size, wave+1 {
		batch := clusters[start:min(start+size, len(clusters))]
		logf(fmt.Sprintf("remove wave %d: %v", wave, batch), map[string]any{"rollout": spec.Key.String(), "orphan": orphan})
		var mu sync.Mutex
		errs := s.forEach(ctx, batch, func(ctx context.Context, name string) error {
			note, err := s.destroyCluster(ctx, spec, name, orphan)
			if note != "" {
				mu.Lock()
				notes[name] = note
				mu.Unlock()
			}
			return err
		})
		maps.Copy(failed, errs)
	}
	return failed, notes
}

// destroyCluster removes the rollout from one cluster: the objects it made are deleted (unless
// orphan), those it adopted are given back as they are, then the records go. note says what
// was given back.
func (s *Service) destroyCluster(ctx context.Context, spec Spec, name string, orphan bool) (note string, err error) {
	if s.previous != nil {
		// A rollout moving between engines (move.go): the engine it moves from may still hold
		// the cluster, and is removed from it by the same deletion policy.
		if _, err := s.previous.remove(s, ctx, spec, name, orphan); err != nil {
			// A Cluster deleted since holds nothing of the old engine's to remove (direct
			// delivery cannot even reach it): only the new engine's Flux objects are left.
			if gone, gerr := s.goneOf(ctx, spec.ClusterNamespace, name); gerr != nil || gone == "" {
				return "", fmt.Errorf("%s, which the rollout moves from: %w", engineName(s.previous), err)
			}
		}
	}
	return s.engine.remove(s, ctx, spec, name, orphan)
}

// remove is destroyCluster delivering directly.
func (directEngine) remove(s *Service, ctx context.Context, spec Spec, name string, orphan bool) (note string, err error) {
	if err := records.Fenced(ctx); err != nil {
		return "", err
	}
	c, err := s.cluster(ctx, spec.ClusterNamespace, name, spec.Key, spec.ForceConflicts)
	if err != nil {
		return "", err
	}
	store := records.NewWorkloadStore(c.client, spec.RecordNamespace)
	state, err := store.Load(ctx, spec.Key)
	if err != nil {
		return "", fmt.Errorf("read records: %w", err)
	}
	if orphan {
		// Left in place, and to whichever rollout applies them next: under the rollout's own
		// field manager they would stay claimed by a rollout that no longer holds them.
		if err := c.applier.Orphan(ctx, previousInventory(state, "")); err != nil {
			return "", fmt.Errorf("leave objects in place: %w", err)
		}
	} else {
		made, adopted := splitAdopted(previousInventory(state, ""), state.AdoptedOf())
		res, err := c.applier.Delete(ctx, made)
		if err != nil {
			return "", fmt.Errorf("delete objects: %w", err)
		}
		// Done only once they are gone, so that an apply right after (a replacement, another
		// rollout of the same objects) does not meet a terminating Namespace.
		if err := c.applier.WaitDeleted(ctx, res.Deleted); err != nil {
			return "", err
		}
		if note, err = giveBack(ctx, c.applier, name, adopted, never); err != nil {
			return "", err
		}
	}
	return note, store.Delete(ctx, spec.Key)
}
