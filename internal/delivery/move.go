package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Moving a rollout between engines (direct delivery to Flux) is an update carried out in waves,
// like any other change of revision (the engine's settings are part of the revision:
// RevisionSettings), with two engines at work instead of one. The service holds the new engine
// (engine) and the one it moves from (previous). Per cluster:
//
//   - Until it verifies on the new engine, the previous one is in charge: the observation takes
//     the cluster's revision from the previous engine's records (moved), so the engine plans the
//     move as a change from that revision, with it as the backup.
//   - The new engine delivers the same content and verifies it as usual. Its failure there is
//     not the content's (the content ran on the previous engine): it is refused for this cluster
//     (ErrChangeRefused, counted against max_failures, never in the invalid ledger), and
//     restoring the cluster to its previous revision is the new engine letting go of it without
//     pruning or deleting anything (remove with orphan), the previous engine's objects and
//     records never having been touched.
//   - Once the run is over, the previous engine lets go of every cluster that verified on the new
//     one, again without pruning or deleting anything (letGo): the direct engine drops its
//     records and its field manager's marks, Flux stops pruning and deletes the Kustomization.
//     It waits for the end of the run because a rollback (on_failure, a failure after bake) may
//     still return a verified cluster to the previous engine.
//
// A run killed at any point leaves each cluster with one engine in charge: the new engine holds
// nothing good there (the previous one is in charge, the next run moves it again), or it
// verified there and the previous one still holds records (the next plan lists the cluster as
// drifted, applies it again and lets the previous engine go).

// MovingFrom returns the service moving its rollout from the engine flux names (nil: direct
// delivery) to its own; s itself when that is the engine s delivers with already (nothing moves).
func (s *Service) MovingFrom(flux *FluxSettings) *Service {
	var prev deliveryEngine = directEngine{}
	if flux != nil {
		prev = fluxEngine{settings: *flux}
	}
	if sameKind(prev, s.engine) {
		return s
	}
	out := *s
	out.previous = prev
	return &out
}

// Moving says whether the service moves its rollout from another engine (MovingFrom).
func (s *Service) Moving() bool { return s.previous != nil }

// EngineName names the engine s delivers with, as a person writes it.
func (s *Service) EngineName() string { return engineName(s.engine) }

// PreviousEngineName names the engine s moves from, "" when it moves from none.
func (s *Service) PreviousEngineName() string {
	if s.previous == nil {
		return ""
	}
	return engineName(s.previous)
}

func engineName(e deliveryEngine) string {
	if _, flux := e.(fluxEngine); flux {
		return "Flux"
	}
	return "direct delivery"
}

func sameKind(a, b deliveryEngine) bool {
	_, af := a.(fluxEngine)
	_, bf := b.(fluxEngine)
	return af == bf
}

// readPrevious reads the previous engine's records of names and folds them into results
// (moved): a cluster the previous engine is in charge of takes its revision from them, and
// obs.Moving and obs.Previous say which clusters those are. A cluster whose previous records
// cannot be read is skipped, saying so: nothing may be done to it until they can.
func (s *Service) readPrevious(ctx context.Context, namespace string, key records.Key, recordNamespace string,
	names []string, results map[string]observed, errs map[string]error, obs *Observation) error {
	read, err := s.previous.reader(s, ctx, namespace, key, recordNamespace, names)
	if err != nil {
		return fmt.Errorf("read the records of %s, which the rollout moves from: %w", engineName(s.previous), err)
	}
	var mu sync.Mutex
	prevErrs := s.forEach(ctx, names, func(ctx context.Context, name string) error {
		rec, st, err := read(ctx, name, nil, false, false)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		cur, ok := results[name]
		if !ok {
			return nil // unread by the new engine: skipped with that reason already
		}
		out, moving, holds, skip := moved(cur, observed{rec, st})
		switch {
		case skip != "":
			errs[name] = skipError(skip)
			delete(results, name)
		case holds:
			results[name] = out
			obs.Previous[name] = rec.Current
			if moving {
				obs.Moving[name] = rec.Current
			}
		}
		return nil
	})
	for name, err := range prevErrs {
		if _, ok := results[name]; ok {
			errs[name] = skipError(fmt.Sprintf("cannot read its records of %s, which the rollout moves from: %s", engineName(s.previous), firstLine(err.Error())))
			delete(results, name)
		}
	}
	return nil
}

// moved folds what the previous engine's records say of a cluster (prev) into what the new
// engine's say (cur). holds says the previous engine still holds the cluster; moving, that it
// is in charge there (the new engine holds no good revision: none verified, none to return to),
// and out then takes its revision from prev, with prev's revision as the backup of a change in
// flight. skip is why the cluster is left alone: the previous engine left a change in flight.
func moved(cur, prev observed) (out observed, moving, holds bool, skip string) {
	p := prev.record
	if p.Current == "" && p.Provisioning == "" && p.Backup == "" {
		return cur, false, false, "" // the previous engine holds nothing here
	}
	if p.Current == "" || p.Provisioning != "" {
		return cur, false, true, fmt.Sprintf("its records of the engine the rollout moves from hold a change in flight (revision %s); "+
			"finish it with that engine before moving", show(p.Provisioning))
	}
	c := cur.record
	if c.Current != "" || c.Backup != "" {
		// Verified on the new engine already (or has a good revision there to return to): the
		// previous engine only has to let go; applied again so that it does, after a verify.
		out = cur
		out.state.State = StateDrifted
		out.state.Drift = append(slices.Clone(out.state.Drift), "still held by the engine the rollout moves from, which lets go of it once it verifies again")
		return out, false, true, ""
	}
	out = prev
	out.record.Invalid = c.Invalid
	if c.Provisioning != "" {
		// A move cut short: back to the previous revision (the previous engine) if it fails.
		out.record.Provisioning, out.record.Backup, out.record.RollingBack = c.Provisioning, p.Current, c.RollingBack
		out.state.State, out.state.Backup = StateProvisioning, p.Current
	}
	return out, true, true, ""
}

// show names a revision, "(none)" for "".
func show(revision string) string {
	if revision == "" {
		return "(none)"
	}
	return revision
}

// movingTo says whether target is moving to the new engine in this run, and the revision the
// previous engine holds there: restoring target to it is the new engine letting go.
func (w *world) movingTo(target string) (string, bool) {
	prev, ok := w.moving[target]
	return prev, ok
}

// moveError is err of the new engine on a target moving to it: the content ran on the previous
// engine, so a failure of the new one to deliver or verify it is no failure of the revision. It
// is refused for this cluster (counted against max_failures, never written to the invalid
// ledger), saying that the cluster stays on the previous engine.
func (w *world) moveError(target string, err error) error {
	if err == nil || !errors.Is(err, engine.ErrRevisionFailed) {
		return err
	}
	if _, ok := w.movingTo(target); !ok {
		return err
	}
	// Its words only: wrapped, it would still be the revision's failure (errors.Is).
	return engine.Mark(engine.ErrChangeRefused, fmt.Errorf("moving to %s: %s; the cluster stays on %s, which still holds its objects "+
		"(the revision ran there: this is not recorded as its failure)", engineName(w.svc.engine), err.Error(), engineName(w.svc.previous)))
}

// letGoNew is Restore of a moving target to the revision the previous engine holds there: the
// new engine lets go of it without pruning or deleting anything, and the previous engine, which
// was never touched, stays in charge.
func (w *world) letGoNew(ctx context.Context, target string) error {
	_, err := w.svc.engine.remove(w.svc, ctx, w.spec, target, true)
	return err
}

// LetGo lets the previous engine go of the clusters that verified on the new one (succeeded),
// without pruning or deleting anything; it returns the clusters let go of and, per cluster, what
// did not complete (they stay held by both, and the next plan applies them again).
func (s *Service) letGo(ctx context.Context, spec Spec, obs *Observation, result engine.Result) (moved, failures []string) {
	if s.previous == nil {
		return nil, nil
	}
	var names []string
	for _, o := range result.Outcomes {
		if _, held := obs.Previous[o.Target]; held && o.Status == engine.StatusSucceeded {
			names = append(names, o.Target)
		}
	}
	errs := s.forEach(ctx, names, func(ctx context.Context, name string) error {
		if _, err := s.previous.remove(s, ctx, spec, name, true); err != nil {
			return fmt.Errorf("%s did not let go of it yet (%w); it runs the revision on %s, and the next apply lets %s go",
				engineName(s.previous), err, engineName(s.engine), engineName(s.previous))
		}
		// What the previous engine applied is the new one's now: its fields, too.
		manager := s.previous.fieldManager(spec.Key)
		if err := s.engine.inherit(s, ctx, spec, name, manager); err != nil {
			return fmt.Errorf("%s let go of it, but the fields %s applied could not be taken over (%w); a later revision that "+
				"changes them may conflict with %s until force_conflicts takes them", engineName(s.previous), manager, err, manager)
		}
		return nil
	})
	for _, name := range names {
		if err, failed := errs[name]; failed {
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
		} else {
			moved = append(moved, name)
		}
	}
	return moved, failures
}
