package fleetupdate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// Observer reads the machines of a cluster's owners without asking any extension
// (owners.Reader).
type Observer interface {
	ClusterOwners(ctx context.Context, namespace, cluster string, o owners.Pick) ([]owners.Selection, string, error)
	Observe(ctx context.Context, sel owners.Selection, change inplace.Change) (*owners.Observation, error)
	VariableDrift(ctx context.Context, namespace, cluster string, vars map[string]json.RawMessage) ([]owners.VariableChange, error)
}

// Refreshed is what a refresh read: every machine's status, the facts the next plan's waves are
// cut from, and notes worth a warning.
type Refreshed struct {
	Status   map[string]string
	Clusters map[string]ClusterFacts
	Notes    []string
}

// Refresh reads the picked clusters' owners and machines (specs, Cluster API's conditions,
// Nodes; no extension is called), at most the provider's max_parallel_clusters
// (Settings.Parallelism) clusters at a time. prior is the machines' status the
// state holds: a machine unchanged and not in it stays out of Status. The first error reading a
// cluster is returned once every cluster was read.
func (s *Service) Refresh(ctx context.Context, spec Spec, prior map[string]string) (*Refreshed, error) {
	found, err := s.Fleet.Discover(ctx, spec.Query)
	if err != nil {
		return nil, err
	}
	out := &Refreshed{Status: map[string]string{}, Clusters: map[string]ClusterFacts{}}
	var mu sync.Mutex
	var firstErr error
	var g errgroup.Group
	g.SetLimit(s.Settings.WithDefaults().Parallelism)
	for _, c := range found.Clusters {
		if c.SkipReason != "" {
			out.Clusters[c.Name] = ClusterFacts{Skip: c.SkipReason}
			continue
		}
		g.Go(func() error {
			st, facts, notes, err := s.refreshCluster(ctx, spec, c.Namespace, c.Name, prior)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return nil
			}
			out.Notes = append(out.Notes, notes...)
			for k, v := range st {
				out.Status[k] = v
			}
			out.Clusters[c.Name] = facts
			return nil // every cluster is read; the first error is returned below
		})
	}
	_ = g.Wait()
	slices.Sort(out.Notes)
	return out, firstErr
}

func (s *Service) refreshCluster(ctx context.Context, spec Spec, namespace, cluster string, prior map[string]string) (map[string]string, ClusterFacts, []string, error) {
	sels, skip, err := s.Observer.ClusterOwners(ctx, namespace, cluster, spec.Owners)
	if err != nil || skip != "" {
		return nil, ClusterFacts{Skip: skip}, nil, err
	}
	status := map[string]string{}
	var notes []string
	facts := ClusterFacts{Settled: true}
	vars := spec.Change.TopologyVariables
	if len(vars) > 0 && !sels[0].Topology && spec.Owners.ControlPlane && spec.skipUnmanaged() {
		// As the plan skips it (owners.FleetRequest.SkipUnmanaged).
		return nil, ClusterFacts{Skip: owners.SkipNoTopology}, nil, nil
	}
	for i, sel := range sels {
		obs, err := s.Observer.Observe(ctx, sel, spec.Change)
		if err != nil {
			return nil, ClusterFacts{}, nil, err
		}
		notes = append(notes, obs.Notes...)
		switch {
		case obs.OwnerGone:
			facts.Recorded, facts.Settled = "", false
		case i == 0:
			facts.Recorded = obs.OwnerRevision
		case obs.OwnerRevision != facts.Recorded:
			facts.Recorded = ""
		}
		for _, m := range obs.Machines {
			if len(m.Changed) > 0 || m.Pending != "" {
				facts.Settled = false
			}
			was, known := prior[m.Machine]
			if st := m.Status(was); known || st != owners.StatusUnchanged {
				status[m.Machine] = st
			}
		}
	}
	if len(vars) > 0 && sels[0].Topology && facts.Recorded == spec.Revision() {
		// Written by an apply: a variable that no longer holds its value was changed since,
		// which no machine may show.
		drift, err := s.Observer.VariableDrift(ctx, namespace, cluster, vars)
		if err != nil {
			return nil, ClusterFacts{}, nil, err
		}
		if len(drift) > 0 {
			facts.Drift = driftText(drift)
		}
	}
	if facts.Recorded == "" || facts.Drift != "" {
		facts.Settled = false
	}
	return status, facts, notes, nil
}

// driftText is the variables a Cluster no longer holds, for the plan: "note is "a" on the
// Cluster, want "b"", joined by "; ".
func driftText(drift []owners.VariableChange) string {
	parts := make([]string, len(drift))
	for i, v := range drift {
		now := v.From
		if now == "" {
			now = "unset"
		}
		parts[i] = fmt.Sprintf("topology variable %s is %s on the Cluster, want %s", v.Name, shortValue(now), shortValue(v.To))
	}
	return strings.Join(parts, "; ")
}

// shortValue cuts a long value for a plan line.
func shortValue(v string) string {
	if len(v) > 60 {
		return v[:57] + "..."
	}
	return v
}
