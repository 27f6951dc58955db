package delivery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Observe reads what the picked clusters and the records say about the rollout key: each
// eligible cluster's recorded revisions and, with drift, whether its live objects still match
// the current revision. A cluster that cannot be read is reported as skipped, with the reason,
// so one broken cluster does not block planning for the fleet. Drift leaves out the fields
// ignore names (the rollout's ignore_fields).
func (s *Service) Observe(ctx context.Context, q fleet.Query, key records.Key, recordNamespace string, drift bool, ignore ...apply.IgnoreRule) (*Observation, error) {
	return s.observe(ctx, q, key, recordNamespace, drift, ignore, nil)
}

// Rendering is a rollout with values as a refresh knows it: its revision, the template (the
// public half of the bundle: the sensitive half is write-only) and the values' rules.
type Rendering struct {
	Revision string
	Template *manifest.Set
	Values   *Values
}

// ObserveRendered is Observe with drift for a rollout with values: a cluster current on
// r.Revision whose objects render differently now than its record holds (a label, annotation or
// topology variable it takes a value from changed) is StateValuesChanged, with the objects
// that differ, so that the next plan updates that cluster. With r.Values nil, r.Template is
// the bundle as is. Either way, a cluster whose records hold nothing is checked for the
// bundle's objects under the rollout's field manager (StateRecordsMissing, unrecorded.go).
func (s *Service) ObserveRendered(ctx context.Context, q fleet.Query, key records.Key, recordNamespace string, r Rendering, ignore ...apply.IgnoreRule) (*Observation, error) {
	return s.observe(ctx, q, key, recordNamespace, true, ignore, &r)
}

func (s *Service) observe(ctx context.Context, q fleet.Query, key records.Key, recordNamespace string, drift bool, ignore apply.Ignore, r *Rendering) (*Observation, error) {
	found, err := s.fleetOf(ctx, q)
	if err != nil {
		return nil, err
	}
	obs, progress, err := s.observeManagement(ctx, found, key, recordNamespace)
	if err != nil {
		return nil, err
	}
	var eligible []string
	rendering := map[string]func() (*manifest.Set, error){}
	for _, c := range found.Clusters {
		if c.Eligible() {
			eligible = append(eligible, c.Name)
			if r != nil {
				rendering[c.Name] = r.renderer(c)
			}
		} else {
			obs.Skipped[c.Name] = c.SkipReason
		}
	}
	read, err := s.engine.reader(s, ctx, q.Namespace, key, recordNamespace, eligible)
	if err != nil {
		return nil, err
	}
	results, errs := s.readClusters(ctx, eligible, read, rendering, ignore, drift, r)
	if err := s.engine.unread(errs); err != nil {
		return nil, err
	}
	if s.previous != nil {
		obs.Previous, obs.Moving = map[string]string{}, map[string]string{}
		if err := s.readPrevious(ctx, q.Namespace, key, recordNamespace, eligible, results, errs, obs); err != nil {
			return nil, err
		}
	}
	obs.addTargets(found.Clusters, results, errs, progress)
	if err := s.observeLeaving(ctx, q.Namespace, progress, obs); err != nil {
		return nil, err
	}
	if r != nil && r.Template != nil {
		// The bundle is known (a refresh): a cluster an earlier run changed whose records hold
		// nothing now is asked whether the rollout's objects are there all the same.
		s.markUnrecorded(ctx, q.Namespace, key, obs, true, objectsOf(rendering))
	}
	return obs, nil
}

// observeManagement starts an observation of found from what the management cluster holds of
// key: the ledger, and the progress record of the last run (returned too: nil for none).
func (s *Service) observeManagement(ctx context.Context, found *fleet.Discovery, key records.Key, recordNamespace string) (*Observation, *records.Progress, error) {
	ledger, err := s.managementStore(recordNamespace).Ledger(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("read the invalid-revision ledger of %s: %w", key, err)
	}
	progress, err := s.managementStore(recordNamespace).LoadProgress(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("read the progress record of %s: %w", key, err)
	}
	obs := &Observation{Discovery: found, Clusters: map[string]ClusterState{}, Skipped: map[string]string{}}
	obs.Interrupted = interruption(progress)
	if progress != nil {
		obs.Managed = progress.Managed
		obs.LostContact, obs.LostContactRevision = lostContactGate(progress), progress.Revision
	}
	for _, entry := range ledger {
		obs.Ledger = append(obs.Ledger, InvalidRevision{Revision: entry.Revision, Reason: entry.Reason, Clusters: entry.Clusters, RecordedAt: entry.RecordedAt})
	}
	for _, name := range found.Missing {
		obs.Skipped[name] = "Cluster not found"
	}
	return obs, progress, nil
}

// observed is one cluster's records as an observation read them.
type observed struct {
	record engine.TargetRecord
	state  ClusterState
}

// readClusters reads each of names through read, at most s.concurrency at once; with values
// (r.Values), a cluster current on r.Revision is compared with its rendering now.
func (s *Service) readClusters(ctx context.Context, names []string, read clusterReader, rendering map[string]func() (*manifest.Set, error),
	ignore apply.Ignore, drift bool, r *Rendering) (map[string]observed, map[string]error) {
	results := make(map[string]observed, len(names))
	var mu sync.Mutex
	errs := s.forEach(ctx, names, func(ctx context.Context, name string) error {
		rec, st, err := read(ctx, name, ignore, drift, r != nil)
		if err == nil && r != nil && r.Values != nil && st.State == StateCurrent && rec.Current == r.Revision {
			st, err = valuesChanged(st, rendering[name])
		}
		if err != nil {
			return err
		}
		mu.Lock()
		results[name] = observed{rec, st}
		mu.Unlock()
		return nil
	})
	return results, errs
}

// addTargets adds a target per cluster to obs: skipped with the reason when it could not be read
// (errs), else with what its records say; the backup most clusters hold; and the failures only
// the clusters' records hold to the ledger.
func (obs *Observation) addTargets(clusters []fleet.Cluster, results map[string]observed, errs map[string]error, progress *records.Progress) {
	backups := map[string]int{}
	for _, c := range clusters {
		t := engine.Target{Name: c.Name, SkipReason: obs.Skipped[c.Name]}
		if err, failed := errs[c.Name]; failed {
			var skip skipError
			if errors.As(err, &skip) {
				t.SkipReason = string(skip)
			} else {
				t.SkipReason = "cannot read the cluster: " + firstLine(err.Error())
			}
			obs.Skipped[c.Name] = t.SkipReason
		} else if r, ok := results[c.Name]; ok {
			t.Record = r.record
			t.Record.RollingBack = rollingBack(progress, c.Name, t.Record)
			obs.Clusters[c.Name] = r.state
			if r.state.Backup != "" || r.state.Revision != "" {
				backups[r.state.Backup]++
			}
		}
		obs.Targets = append(obs.Targets, t)
	}
	obs.Backup = MostCommon(backups)
	obs.Ledger = withClusterFailures(obs.Ledger, obs.Targets)
}

// observeLeaving fills obs.Leaving and obs.Placed from the clusters the progress record says
// earlier runs changed. Clusters since deleted are dropped, unless the engine left something of
// theirs in place (leftBehind): then they leave too.
func (s *Service) observeLeaving(ctx context.Context, namespace string, progress *records.Progress, obs *Observation) error {
	if progress == nil {
		return nil
	}
	leaving, err := s.placedElsewhere(ctx, namespace, progress.Placed, obs.Discovery.Clusters)
	if err != nil {
		return err
	}
	for _, c := range obs.Discovery.Clusters {
		if slices.Contains(progress.Placed, c.Name) {
			obs.Placed = append(obs.Placed, c.Name)
		}
	}
	for _, c := range leaving {
		obs.Leaving = append(obs.Leaving, c.Name)
	}
	obs.Leaving = append(obs.Leaving, s.engine.leftBehind(progress.Placed, obs.Discovery.Clusters, leaving)...)
	obs.Placed = append(obs.Placed, obs.Leaving...)
	sort.Strings(obs.Leaving)
	sort.Strings(obs.Placed)
	return nil
}

// placedElsewhere returns the clusters of placed (see records.Progress.Placed) that picked does
// not hold and that still exist.
func (s *Service) placedElsewhere(ctx context.Context, namespace string, placed []string, picked []fleet.Cluster) ([]fleet.Cluster, error) {
	var others []string
	for _, name := range placed {
		if !slices.ContainsFunc(picked, func(c fleet.Cluster) bool { return c.Name == name }) {
			others = append(others, name)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	found, err := s.fleetOf(ctx, fleet.Query{Namespace: namespace, Names: others})
	if err != nil {
		return nil, err
	}
	return found.Clusters, nil
}

// valuesChanged marks st (current, its record's objects in st.recorded) StateValuesChanged
// when render gives other objects than the record holds. A cluster that cannot be rendered any
// more (a label it takes a variable from is gone) is marked too, with the reason: the plan
// refuses it, naming the variable.
func valuesChanged(st ClusterState, render func() (*manifest.Set, error)) (ClusterState, error) {
	recorded := st.recorded
	st.recorded = nil
	if render == nil || recorded == nil {
		return st, nil
	}
	set, err := render()
	if m, ok := manifest.IsMissingVariables(err); ok {
		st.State, st.Drift = StateValuesChanged, []string{"cannot be rendered: " + m.Error()}
		return st, nil
	}
	if err != nil {
		return st, err
	}
	changed, err := RenderedChanges(recorded, set, true)
	if err != nil {
		return st, err
	}
	if len(changed) > 0 {
		st.State, st.Drift = StateValuesChanged, changed
	}
	return st, nil
}

// clusterStateOf is what a cluster's records say, for the plan and the engine: its revisions and
// its state (provisioning, pending or current; drift is the engine's to tell).
func clusterStateOf(state *records.State) (engine.TargetRecord, ClusterState) {
	rec := targetRecord(state)
	st := ClusterState{Revision: rec.Current, Backup: rec.Backup, State: StateCurrent}
	for _, sk := range state.Skipped {
		st.SkippedRecords = append(st.SkippedRecords, sk.String())
	}
	switch {
	case rec.Provisioning != "":
		st.State = StateProvisioning
	case rec.Current == "":
		st.State = StatePending
	}
	return rec, st
}

// targetRecord is what the engine needs from a cluster's records. While a change is in flight,
// the revision to return to is the last good one (the current record, else the backup).
func targetRecord(state *records.State) engine.TargetRecord {
	rec := engine.TargetRecord{Invalid: state.InvalidRevisions()}
	if state.Current != nil {
		rec.Current = state.Current.Revision
	}
	if state.Provisioning != nil {
		rec.Provisioning = state.Provisioning.Revision
		if good := state.LastGood(); good != nil {
			rec.Backup = good.Revision
		}
	} else if state.Backup != nil {
		rec.Backup = state.Backup.Revision
	}
	return rec
}

// fromClustersNote ends the reason of a failure only the clusters' records hold.
const fromClustersNote = " (from the cluster's records: the ledger entry was not written)"

// withClusterFailures adds to ledger the revisions the clusters' own records hold invalid and the
// ledger does not: a failure whose ledger entry could not be written (the management cluster
// was unreachable when the revision failed) is still refused by the next plan, naming where and
// why it failed. A revision some cluster runs is left out: records keep a failure's reason after
// a deliberate retry (retry_invalid) succeeded and cleared the ledger.
func withClusterFailures(ledger []InvalidRevision, targets []engine.Target) []InvalidRevision {
	added := map[string]int{}
	for _, t := range targets {
		for _, rev := range sortedKeys(t.Record.Invalid) {
			if slices.ContainsFunc(ledger, func(l InvalidRevision) bool { return l.Revision == rev }) && added[rev] == 0 || RunsRevision(targets, rev) {
				continue
			}
			if added[rev] == 0 {
				ledger = append(ledger, InvalidRevision{Revision: rev, FromClusters: true,
					Reason: t.Record.Invalid[rev] + fromClustersNote})
				added[rev] = len(ledger)
			}
			l := &ledger[added[rev]-1]
			l.Clusters = append(l.Clusters, t.Name)
		}
	}
	return ledger
}

// rollingBack reports whether the run that left name's record provisioning was rolling it back
// (its progress says so, for the same revision), so that the next run completes the rollback.
func rollingBack(p *records.Progress, name string, rec engine.TargetRecord) bool {
	if p == nil || rec.Provisioning == "" {
		return false
	}
	o, ok := p.Clusters[name]
	return ok && o.State == string(engine.EventRollingBack) && p.Revision == rec.Provisioning
}

// interruption describes the last run if it did not finish (its process was killed, or it is
// running now), from the management cluster's progress record; nil otherwise.
func interruption(p *records.Progress) *Interruption {
	if p == nil || (p.Phase != records.PhaseRunning && p.Phase != records.PhaseInterrupted) {
		return nil
	}
	in := &Interruption{Phase: p.Phase, Revision: p.Revision, Wave: p.Wave, Waves: p.Waves, Holder: p.Holder, UpdatedAt: p.UpdatedAt}
	for _, name := range sortedKeys(p.Clusters) {
		switch p.Clusters[name].State {
		case string(engine.EventProvisioning), string(engine.EventRollingBack), string(engine.StatusUnsettled):
			in.Clusters = append(in.Clusters, name)
		}
	}
	return in
}

// lostContactGate is the gate the last run left (nil: none): the clusters it lost contact with
// after their change began, when it did not take the revision past them. It holds when the
// run stopped before clusters it had planned (halted, not started), and when it never finished
// (killed or cancelled before its last wave). Within max_unsettled a finished run went on past
// them already, and the next one just settles them.
func lostContactGate(p *records.Progress) map[string]string {
	lost := maps.Clone(p.LostContact)
	for name := range lost {
		if p.Clusters[name].State == string(engine.StatusGone) {
			delete(lost, name) // it left the fleet since: nothing to stop on
		}
	}
	for name, o := range p.Clusters {
		if o.State == string(engine.StatusLostContact) {
			if lost == nil {
				lost = map[string]string{}
			}
			if _, ok := lost[name]; !ok || o.Reason != "" {
				lost[name] = o.Reason
			}
		}
	}
	halted := slices.ContainsFunc(slices.Collect(maps.Values(p.Clusters)), func(o records.ClusterOutcome) bool {
		return o.State == string(engine.StatusNotStarted)
	})
	unfinished := (p.Phase == records.PhaseRunning || p.Phase == records.PhaseInterrupted) && p.Wave < p.Waves
	stoppedBefore := halted && p.Phase != records.PhaseRunning
	if len(lost) == 0 || !stoppedBefore && !unfinished {
		return nil
	}
	return lost
}

// MarkDrifted returns targets with the drifted ones marked, so that the engine applies their
// (already current) revision again.
func MarkDrifted(targets []engine.Target, drifted map[string]bool) []engine.Target {
	out := make([]engine.Target, len(targets))
	for i, t := range targets {
		t.Drifted = drifted[t.Name]
		out[i] = t
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
