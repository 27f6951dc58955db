package delivery

import (
	"context"
	"fmt"
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

	found, err := s.mgmt.Discover(ctx, req.Query)
	if err != nil {
		return nil, err
	}
	var reachable []string
	for _, c := range found.Clusters {
		if c.Eligible() {
			reachable = append(reachable, c.Name)
		} else {
			warnings = append(warnings, fmt.Sprintf("%s: %s; its objects and records of %s are left in place", c.Name, c.SkipReason, spec.Key.Describe()))
		}
	}
	size := spec.Policy.UpdateLimit.Resolve(len(reachable))
	var failures []string
	notes := map[string]string{} // adopted objects given back, by cluster
	defer func() {
		for _, name := range sortedKeys(notes) {
			if req.Adopted != nil {
				req.Adopted(notes[name])
			} else {
				warnings = append(warnings, notes[name])
			}
		}
	}()
	for start, wave := 0, 1; start < len(reachable); start, wave = start+size, wave+1 {
		batch := reachable[start:min(start+size, len(reachable))]
		req.Logf(fmt.Sprintf("destroy wave %d: %v", wave, batch), map[string]any{"rollout": spec.Key.String(), "orphan": req.Orphan})
		var mu sync.Mutex
		errs := s.forEach(ctx, batch, func(ctx context.Context, name string) error {
			note, err := s.destroyCluster(ctx, spec, name, req.Orphan)
			if note != "" {
				mu.Lock()
				notes[name] = note
				mu.Unlock()
			}
			return err
		})
		for _, name := range sortedKeys(errs) {
			failures = append(failures, fmt.Sprintf("%s: %v", name, errs[name]))
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

// destroyCluster removes the rollout from one cluster: the objects it made are deleted (unless
// orphan), those it adopted are given back as they are, then the records go. note says what
// was given back.
func (s *Service) destroyCluster(ctx context.Context, spec Spec, name string, orphan bool) (note string, err error) {
	c, err := s.cluster(ctx, spec.ClusterNamespace, name, spec.ForceConflicts)
	if err != nil {
		return "", err
	}
	store := records.NewWorkloadStore(c.client, spec.RecordNamespace)
	state, err := store.Load(ctx, spec.Key)
	if err != nil {
		return "", fmt.Errorf("read records: %w", err)
	}
	if !orphan {
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
