package engine

import (
	"cmp"
	"slices"
)

// Target is one thing a revision is rolled out to: a cluster, or a machine
// for in-place updates.
type Target struct {
	// Name identifies the target; it is unique within one rollout.
	Name string
	// SkipReason, when not empty, says why the target cannot be changed now
	// (e.g. "control plane not initialized"). Skipped targets are left alone
	// and shown in the plan; a later apply picks them up.
	SkipReason string
	// Record is what the target's records say about this rollout.
	Record TargetRecord
	// Drifted says the target's live state no longer matches its current
	// revision (objects edited or deleted by hand): a target already on the
	// desired revision is then applied again to repair it.
	Drifted bool
	// Refused, when not empty, says why the desired revision must not be
	// applied to the target (it is recorded invalid): a target already on it
	// is left alone, one an earlier run left in flight is restored to its
	// backup, and any other is skipped with this reason.
	Refused string
}

// TargetRecord is the recorded state of one rollout on one target, as the
// records store read it back. It is how the engine learns what an earlier
// run did, including a run that was interrupted.
//
// The store keeps it in step with the Events it is given (see EventKind):
// Provisioning is set, together with Backup, before anything is changed, and
// cleared only once the target is settled again, on success (Current becomes
// the new revision) or after a restore (Current becomes Backup).
type TargetRecord struct {
	// Current is the revision the target was last verified on ("" if none).
	Current string
	// Backup is the revision to restore when the change in progress (or the
	// last one that succeeded) has to be undone. "" means nothing was
	// installed before: restoring removes what the rollout applied.
	Backup string
	// Provisioning is the revision being applied when a run stopped before
	// settling this target; "" when the target is settled.
	Provisioning string
	// Invalid maps revisions that failed verification on this target to
	// the reason they failed.
	Invalid map[string]string
	// RollingBack says the run that left the target provisioning was
	// restoring it to Backup (EventRollingBack), not applying Provisioning:
	// the next run completes the rollback before anything else.
	RollingBack bool
}

// Invalidity says where and why a revision was recorded invalid.
type Invalidity struct {
	Target string
	Reason string
}

// KnownInvalid reports, sorted by target, every target whose records show
// revision as invalid. Resources refuse to plan such a revision unless the
// user retries it on purpose; the engine itself will apply it if asked.
func KnownInvalid(targets []Target, revision string) []Invalidity {
	var out []Invalidity
	for _, t := range targets {
		if reason, ok := t.Record.Invalid[revision]; ok {
			out = append(out, Invalidity{Target: t.Name, Reason: reason})
		}
	}
	slices.SortFunc(out, func(a, b Invalidity) int { return cmp.Compare(a.Target, b.Target) })
	return out
}
