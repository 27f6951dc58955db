package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The per-target steps. Each runs on its own goroutine and owns its
// Outcome while it runs.

// applyTarget moves one target to the desired revision: record
// provisioning, apply, verify, record success.
func (r *run) applyTarget(ctx context.Context, o *Outcome) {
	if r.stop(ctx) {
		return
	}
	r.begin(o)
	defer r.end(o)
	desired := r.plan.Desired
	// Recorded before anything changes, and on ctx itself rather than a
	// fresh context: after cancellation nothing new may start.
	if err := r.world.Record(ctx, r.event(EventProvisioning, o.Target, desired, o.Backup, "")); err != nil {
		reason := "record provisioning: " + err.Error()
		switch {
		case r.stop(ctx):
			o.Error = "cancelled before any change: " + err.Error()
		case classOf(err) == classGone:
			r.gone(ctx, o, reason)
		default:
			// Nothing was applied, and a record that cannot be written says nothing about the
			// revision: the target is left as it was, not counted, and reported.
			o.Error, o.Status = reason, StatusUnsettled
		}
		return
	}
	o.Unsettled, o.Provisioning = true, desired
	if err := r.world.Apply(ctx, o.Target, desired); err != nil {
		r.fail(ctx, o, "apply "+desired, err, false)
		return
	}
	if err := r.verify(ctx, o.Target, desired); err != nil {
		r.fail(ctx, o, "verify "+desired, err, false)
		return
	}
	r.succeed(ctx, o)
}

// resumeTarget settles a target an earlier run left unsettled.
func (r *run) resumeTarget(ctx context.Context, o *Outcome) {
	if r.stop(ctx) {
		return
	}
	r.begin(o)
	defer r.end(o)
	in := r.plan.Intents[o.Target]
	ok, err := r.restore(ctx, o, in.RestoreTo, "resume: "+in.Reason, false)
	if ok {
		o.Status = StatusRestored
		return
	}
	if o.Status == StatusUnsettled && classOf(err) >= classRefused {
		// A target that cannot be restored cannot take the revision either; count it so a
		// broken fleet stops the rollout. An unreachable one says nothing of the kind.
		r.countFailure(o)
		r.note(ctx, o, r.event(EventFailed, o.Target, in.Provisioning, in.RestoreTo, o.Error))
	}
}

// reverifyTarget verifies a target again after its wave baked.
func (r *run) reverifyTarget(ctx context.Context, o *Outcome) {
	r.begin(o)
	defer r.end(o)
	desired := r.plan.Desired
	if err := r.verify(ctx, o.Target, desired); err != nil {
		r.fail(ctx, o, "verify "+desired+" after bake", err, true)
	}
}

// rollbackTarget restores a target that succeeded once the run gave up.
func (r *run) rollbackTarget(ctx context.Context, o *Outcome) {
	r.begin(o)
	defer r.end(o)
	if ok, _ := r.restore(ctx, o, o.Backup, "rollback: "+r.res.AbortReason, true); ok {
		o.Status = StatusRolledBack
	}
}

// succeed records the target on the desired revision. A record that cannot be written after
// the change is no detail: the cluster took our change and then stopped accepting writes (a
// revision can break its admission), so the target lost contact rather than succeeded.
func (r *run) succeed(ctx context.Context, o *Outcome) {
	err := r.recordFresh(ctx, r.event(EventSucceeded, o.Target, r.plan.Desired, o.Backup, ""))
	switch {
	case err == nil:
		o.Status, o.Revision = StatusSucceeded, r.plan.Desired
		o.Unsettled, o.Provisioning = false, ""
	case classOf(err) == classGone:
		r.gone(ctx, o, "record succeeded: "+err.Error())
	default:
		r.loseContact(ctx, o, "verified, but its record could not be written: "+err.Error(), false)
	}
}

// fail handles an error from a step that changed or checked the target, by its class (see
// ErrRevisionFailed). settled says whether the target is recorded on the revision already (a
// failure after bake).
func (r *run) fail(ctx context.Context, o *Outcome, step string, err error, settled bool) {
	reason := step + ": " + err.Error()
	class := classOf(err)
	if class == classGone {
		r.gone(ctx, o, reason)
		return
	}
	if ctx.Err() != nil {
		// Cancelled, not failed: nothing is counted. A target recorded on the
		// revision stays; one in flight goes back to its backup. But a failure
		// the revision's own objects reported before the cancellation (a Lease
		// lost while the management cluster was paused, say) is a verdict seen:
		// it is recorded invalid where the World still can, never dropped.
		r.cancelled.Store(true)
		o.Error = reason
		if class == classRevision && !r.policy.Irreversible {
			o.Invalid = r.note(ctx, o, r.event(EventInvalid, o.Target, r.plan.Desired, o.Backup, reason))
		}
		if r.policy.Irreversible && !settled {
			// Left in flight, recorded so: the next run applies the revision again.
			o.Status = StatusUnsettled
			return
		}
		if !settled {
			if ok, _ := r.restore(ctx, o, o.Backup, "cancelled", false); ok {
				o.Status = StatusCancelled
			}
		}
		return
	}
	if class == classInfrastructure {
		// The change began (something may be applied): the target answered before it and
		// does not now.
		r.loseContact(ctx, o, reason, settled)
		return
	}
	r.countFailure(o)
	o.Error = reason
	desired := r.plan.Desired
	r.note(ctx, o, r.event(EventFailed, o.Target, desired, o.Backup, reason))
	if r.policy.Irreversible {
		// Not restored, not recorded invalid (see Policy.Irreversible): named, and counted.
		o.Status = StatusFailed
		return
	}
	if class == classRevision {
		if r.note(ctx, o, r.event(EventInvalid, o.Target, desired, o.Backup, reason)) {
			o.Invalid = true
		} else {
			// A failure the ledger does not hold would be offered again by the next plan as
			// if nothing had happened: stop here rather than take the revision further.
			r.halt(fmt.Sprintf("revision %s failed on %s but could not be recorded invalid", desired, o.Target))
		}
	}
	if ok, _ := r.restore(ctx, o, o.Backup, reason, settled); ok {
		o.Status = StatusFailed
	}
}

// loseContact handles a target that stopped answering after its change began: an
// infrastructure failure once something was applied, or a record that could not be written
// after it. It counts against max_unsettled (halting later waves once spent), is not recorded
// invalid (API errors are retried, not blamed), and is restored to its backup where that still
// works (a webhook configuration the revision brought is deleted first; see World.Restore).
// settled says the target is recorded on the desired revision already (a failure after bake).
// An irreversible change is not restored: the target stays in flight for the next run.
func (r *run) loseContact(ctx context.Context, o *Outcome, reason string, settled bool) {
	r.countLostContact()
	o.Error, o.Status = reason, StatusLostContact
	r.note(ctx, o, r.event(EventUnsettled, o.Target, r.plan.Desired, o.Backup, reason))
	if r.policy.Irreversible {
		return
	}
	// The cluster just failed to answer: the attempt is bounded tighter than a rollback (twice
	// the verify timeout, which covers the restore's own verification), so an unreachable
	// cluster does not hold the apply for the whole rollback timeout.
	within := min(r.policy.RollbackTimeout, 2*r.policy.VerifyTimeout)
	if _, err := r.restoreWithin(ctx, o, o.Backup, reason, settled, within); err != nil && o.Status == StatusGone {
		return
	}
	o.Status = StatusLostContact
}

// restore brings a target back to revision to and verifies it, on a fresh
// context bounded by the rollback timeout: a restore is how a target gets
// back to a recorded state, so a cancelled apply must not cut it short.
// settled says the target is recorded on the desired revision, which must
// first be recorded as being undone. It reports whether the target is now
// on to; if not, o says why (StatusUnsettled, or unchanged when even the
// intent to restore could not be recorded) and err is the World's error.
func (r *run) restore(ctx context.Context, o *Outcome, to, why string, settled bool) (bool, error) {
	return r.restoreWithin(ctx, o, to, why, settled, r.policy.RollbackTimeout)
}

// restoreWithin is restore bounded by timeout instead of the rollback timeout.
func (r *run) restoreWithin(ctx context.Context, o *Outcome, to, why string, settled bool, timeout time.Duration) (bool, error) {
	// Outlives cancellation: a target in flight ends restored and recorded, not half-changed.
	rctx, cancel := r.clock.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if settled {
		ev := r.event(EventRollingBack, o.Target, r.plan.Desired, to, why)
		if err := r.world.Record(rctx, ev); err != nil {
			// Unrecorded changes are worse than a target left on the
			// revision: leave it, and say so.
			o.Error = join(o.Error, "not restored to "+show(to)+": record rolling back: "+err.Error())
			return false, err
		}
		o.Unsettled, o.Provisioning = true, r.plan.Desired
	}
	err := r.world.Restore(rctx, o.Target, to)
	if err == nil {
		err = r.verify(rctx, o.Target, to)
	}
	if err != nil {
		if rctx.Err() != nil && !errors.Is(err, ErrTargetGone) {
			err = fmt.Errorf("restore timeout %s exceeded: %w", timeout, err)
		}
		reason := "restore to " + show(to) + ": " + err.Error()
		if errors.Is(err, ErrTargetGone) {
			r.gone(ctx, o, join(o.Error, reason))
			return false, err
		}
		o.Error = join(o.Error, reason)
		o.Status = StatusUnsettled
		r.note(ctx, o, r.event(EventRestoreFailed, o.Target, to, to, reason))
		return false, err
	}
	o.Revision, o.Backup = to, to
	if r.note(ctx, o, r.event(EventRestored, o.Target, to, to, why)) {
		o.Unsettled, o.Provisioning = false, ""
	}
	return true, nil
}

func (r *run) gone(ctx context.Context, o *Outcome, reason string) {
	o.Status, o.Error = StatusGone, reason
	o.Unsettled, o.Provisioning, o.Revision = false, "", ""
	r.note(ctx, o, r.event(EventGone, o.Target, "", "", reason))
}

// verify runs World.Verify bounded by the verify timeout, saying so when
// the timeout (rather than ctx) ended it.
func (r *run) verify(ctx context.Context, target, revision string) error {
	vctx, cancel := r.clock.WithTimeout(ctx, r.policy.VerifyTimeout)
	defer cancel()
	err := r.world.Verify(vctx, target, revision)
	if err != nil && ctx.Err() == nil && vctx.Err() != nil {
		return fmt.Errorf("timed out after %s: %w", r.policy.VerifyTimeout, err)
	}
	return err
}

// note records a target event, reporting whether it was written; a failure
// is added to the outcome's error. After cancellation it records on a fresh
// bounded context: settling records are what makes a cancelled run
// resumable.
func (r *run) note(ctx context.Context, o *Outcome, ev Event) bool {
	if err := r.recordFresh(ctx, ev); err != nil {
		o.Error = join(o.Error, fmt.Sprintf("record %s: %v", ev.Kind, err))
		return false
	}
	return true
}

// recordRun records a run or batch event; failures are kept on the result.
func (r *run) recordRun(ctx context.Context, ev Event) {
	ev.At = r.clock.Now()
	if err := r.recordFresh(ctx, ev); err != nil {
		r.res.RecordErrors = append(r.res.RecordErrors, fmt.Sprintf("%s %s %d: %v", ev.Kind, ev.Phase, ev.Batch, err))
	}
}

func (r *run) recordFresh(ctx context.Context, ev Event) error {
	if ctx.Err() != nil {
		// Outlives cancellation: a cancelled run still records how it ended.
		fctx, cancel := r.clock.WithTimeout(context.WithoutCancel(ctx), r.policy.RollbackTimeout)
		defer cancel()
		ctx = fctx
	}
	return r.world.Record(ctx, ev)
}

func (r *run) event(kind EventKind, target, revision, backup, reason string) Event {
	return Event{Kind: kind, At: r.clock.Now(), Target: target, Revision: revision, Backup: backup, Reason: reason}
}

func (r *run) begin(o *Outcome) {
	if o.Started.IsZero() {
		o.Started = r.clock.Now()
	}
}

func (r *run) end(o *Outcome) {
	o.Finished = r.clock.Now()
	o.Duration = o.Finished.Sub(o.Started)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
