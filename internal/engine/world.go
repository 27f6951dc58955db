package engine

import (
	"context"
	"errors"
	"time"
)

// ErrTargetGone is wrapped by World errors when the target no longer exists
// (a cluster deleted mid-rollout). Such a target is not restored, not
// recorded invalid and not counted against the failure budget: its
// disappearance says nothing about the revision.
var ErrTargetGone = errors.New("target no longer exists")

// The classes of World errors. The engine never guesses: an error the World did not mark with
// ErrRevisionFailed or ErrChangeRefused, and that is not ErrTargetGone, is an infrastructure
// failure (an unreachable or overloaded API server, a timed-out request, a failed read of the
// records). Infrastructure failures say nothing about the revision, so they are neither counted
// against the failure budget nor recorded invalid; the target is left unsettled (its record
// still shows the change in flight) for the next run to apply again, and nothing is restored,
// since whatever broke the change would break the restore as well.
var (
	// ErrRevisionFailed marks errors that are the revision's fault: its objects were not ready
	// within the verify timeout, a check failed, or the API server rejected its objects
	// (admission, schema). It counts against the budget, the target is restored, and the
	// revision is recorded invalid there.
	ErrRevisionFailed = errors.New("revision failed")
	// ErrChangeRefused marks errors that stop this change on this target for a reason that
	// retrying will not fix but that says nothing about the revision's health (a field owned
	// by another manager). It counts against the budget and the target is restored, but the
	// revision is not recorded invalid.
	ErrChangeRefused = errors.New("change refused")
)

// Mark returns err marked with class (ErrRevisionFailed, ErrChangeRefused or ErrTargetGone),
// keeping err's message: errors.Is(Mark(c, err), c) holds, and so does errors.Is/As for
// whatever err wraps.
func Mark(class, err error) error {
	if err == nil {
		return nil
	}
	return &marked{class: class, err: err}
}

type marked struct{ class, err error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.class, m.err} }

// errorClass is how fail and restore treat a World error.
type errorClass int

const (
	classInfrastructure errorClass = iota
	classGone
	classRefused
	classRevision
)

func classOf(err error) errorClass {
	switch {
	case errors.Is(err, ErrTargetGone):
		return classGone
	case errors.Is(err, ErrRevisionFailed):
		return classRevision
	case errors.Is(err, ErrChangeRefused):
		return classRefused
	default:
		return classInfrastructure
	}
}

// World is how the engine changes and observes targets. Execute calls it
// concurrently for different targets, never concurrently for one target.
type World interface {
	// Apply applies revision to target (for clusters: server-side apply of
	// its objects and pruning of the previous inventory).
	Apply(ctx context.Context, target, revision string) error
	// Verify reports whether target is healthy on revision (for clusters:
	// every object of the revision ready). Verifying "" checks that what
	// the rollout applied is gone. ctx carries the verify timeout.
	Verify(ctx context.Context, target, revision string) error
	// Restore returns target to revision, its backup: objects re-applied
	// and objects only the newer revision had deleted. Restoring to ""
	// removes everything the rollout applied.
	Restore(ctx context.Context, target, revision string) error
	// Record persists an event (see EventKind for what each one means to
	// the records store). Execute records a target as provisioning before
	// changing it, so nothing it applies goes unrecorded. Event.Targets
	// shares memory with the Plan and must not be modified.
	Record(ctx context.Context, ev Event) error
}

// Holder is implemented by Worlds whose targets may be held back at the moment their wave
// starts, for a reason that arises with time alone (a maintenance window that closed since the
// plan). Execute asks it for each target of a wave right before the wave starts: a held target
// is not changed in this run, nothing is recorded for it, and its outcome is StatusSkipped with
// the reason in Error, for the next run to pick up.
type Holder interface {
	// Held says why target must not start changing now; "" when it may.
	Held(target string) string
}

// EventKind says what an Event records.
type EventKind string

// Target events. The store keeps each target's TargetRecord in step with
// them as described; the others are informational (the rollout's progress
// record and the invalid-revision ledger).
const (
	// EventProvisioning: the target is about to change to Revision.
	// Store: Provisioning = Revision, Backup = Backup. Written before
	// anything is applied; if it cannot be written, nothing is applied.
	EventProvisioning EventKind = "provisioning"
	// EventSucceeded: Revision verified on the target.
	// Store: Current = Revision, Backup = Backup, Provisioning = "".
	EventSucceeded EventKind = "succeeded"
	// EventFailed: the change to Revision failed (Reason); it counts
	// against the failure budget. A restore follows.
	EventFailed EventKind = "failed"
	// EventInvalid: Revision failed verification on the target (Reason).
	// Store: Invalid[Revision] = Reason, and the management ledger.
	EventInvalid EventKind = "invalid"
	// EventRollingBack: a target settled on Revision is about to be
	// restored to Backup (on_failure = rollback, or a failure after bake).
	// Store: as EventProvisioning, so an interrupted rollback is restored
	// again by the next run.
	EventRollingBack EventKind = "rolling-back"
	// EventRestored: the target was restored to Revision and verified.
	// Store: Current = Revision, Backup = Revision, Provisioning = "".
	EventRestored EventKind = "restored"
	// EventRestoreFailed: restoring to Revision failed (Reason). The record
	// stays provisioning, so the next run restores the target again.
	EventRestoreFailed EventKind = "restore-failed"
	// EventGone: the target vanished (Reason).
	EventGone EventKind = "gone"
	// EventUnsettled: the change to Revision could not be completed for a reason outside the
	// revision (an infrastructure failure, Reason). Store: unchanged; the target's record still
	// shows the change in flight, so the next run applies it again.
	EventUnsettled EventKind = "unsettled"
)

// Run events, with Target "".
const (
	// EventRunStarted and EventRunFinished bracket a run; the latter's
	// Reason summarises how it ended.
	EventRunStarted  EventKind = "run-started"
	EventRunFinished EventKind = "run-finished"
	// EventBatchStarted and EventBatchDone bracket a batch of targets
	// changed together: a wave, or a step of resuming or rolling back.
	// Between them only the batch's Targets are touched.
	EventBatchStarted EventKind = "batch-started"
	EventBatchDone    EventKind = "batch-done"
)

// Phase names what a batch does.
type Phase string

const (
	// PhaseResume settles targets an earlier run left unsettled.
	PhaseResume Phase = "resume"
	// PhaseWave applies the desired revision.
	PhaseWave Phase = "wave"
	// PhaseRollback restores targets after the failure budget ran out.
	PhaseRollback Phase = "rollback"
)

// Event is one thing worth recording.
type Event struct {
	Kind EventKind
	// At is the Clock's time when the event was recorded.
	At time.Time
	// Target is the target concerned; "" for run and batch events.
	Target   string
	Revision string
	Backup   string
	Reason   string
	// Phase, Batch (1-based), Batches (how many the phase has, when known)
	// and Targets describe batch events.
	Phase   Phase
	Batch   int
	Batches int
	Targets []string
}
