package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Status is how a target ended up after Execute.
type Status string

const (
	// StatusSucceeded: the target now runs the desired revision, verified
	// (and baked) by this run.
	StatusSucceeded Status = "succeeded"
	// StatusAlreadyCurrent: the target already ran the desired revision.
	StatusAlreadyCurrent Status = "already-current"
	// StatusSkipped: the plan skipped the target, or the World held it back when its wave
	// started (Holder: its maintenance window closed since the plan).
	StatusSkipped Status = "skipped"
	// StatusNotStarted: the target was due to change but the run stopped
	// (budget exceeded or cancelled) before its turn; it is unchanged.
	StatusNotStarted Status = "not-started"
	// StatusRestored: an earlier run left the target unsettled and this run
	// restored it to its backup; no wave applied the desired revision since.
	StatusRestored Status = "restored"
	// StatusFailed: the change failed and the target was restored to its
	// backup. It counted against the failure budget.
	StatusFailed Status = "failed"
	// StatusRolledBack: the target succeeded, then was restored to its
	// backup because the run exceeded its failure budget (on_failure =
	// rollback).
	StatusRolledBack Status = "rolled-back"
	// StatusCancelled: the target was in flight when the run was cancelled
	// and was restored to its backup.
	StatusCancelled Status = "cancelled"
	// StatusUnsettled: the target could not be brought to a known revision:
	// its change met an infrastructure failure (an unreachable or failing
	// API server; nothing is restored and nothing counted), or its restore
	// failed. Its record still shows it provisioning (Unsettled), so the
	// next run applies or restores it again. Error says why.
	StatusUnsettled Status = "unsettled"
	// StatusGone: the target vanished during the run.
	StatusGone Status = "gone"
	// StatusLostContact: the target was reachable before its change and could not be written,
	// read or verified after it began (an infrastructure failure once something was applied,
	// or a record of success that could not be written). That is a signal, not noise: a
	// revision can break a cluster's admission or API server. It counts against max_unsettled,
	// the target is restored to its backup where possible (Revision says where it ended;
	// Unsettled when the restore failed too), and the revision is not recorded invalid on that
	// evidence alone.
	StatusLostContact Status = "lost-contact"
)

// statusOrder is the order outcome counts are reported in.
var statusOrder = []Status{StatusSucceeded, StatusAlreadyCurrent, StatusFailed, StatusRolledBack, StatusLostContact,
	StatusUnsettled, StatusRestored, StatusCancelled, StatusGone, StatusNotStarted, StatusSkipped}

// Outcome is what happened to one target.
type Outcome struct {
	Target string
	// Intent is the planned action; Wave the target's wave (0 if none).
	Intent Action
	Wave   int
	Status Status
	// Revision is the revision the target ended on ("" = nothing
	// installed); meaningless when Status is StatusUnsettled or StatusGone.
	Revision string
	// Backup is the revision the target returns to if its current change
	// is undone (for a target that succeeded: what it ran before).
	Backup string
	// Failed is set when the target counted against the failure budget.
	Failed bool
	// Invalid is set when this run recorded the desired revision invalid
	// on the target (its verification failed).
	Invalid bool
	// Unsettled is set when the target's record still shows it
	// provisioning (Provisioning): its restore failed, or its final record
	// could not be written. The next run verifies or restores it.
	Unsettled    bool
	Provisioning string
	// Started and Finished bound the work done on the target (zero if
	// none was done).
	Started, Finished time.Time
	Duration          time.Duration
	// Error says what went wrong, if anything did.
	Error string
}

// Result is what Execute did.
type Result struct {
	Desired string
	// Outcomes holds one entry per target, in Plan.Order.
	Outcomes []Outcome
	// Failures counts targets that counted against the budget of
	// MaxFailures.
	Failures    int
	MaxFailures int
	// LostContact counts targets that stopped answering after their change began
	// (StatusLostContact), against MaxUnsettled.
	LostContact  int
	MaxUnsettled int
	// WavesDone counts waves that ran to completion (verified and baked).
	WavesDone int
	// Aborted is set when failures exceeded the budget, targets that lost contact exceeded
	// max_unsettled, or the run could not record a revision invalid; AbortReason says which,
	// and RolledBack whether targets were then rolled back.
	Aborted     bool
	AbortReason string
	RolledBack  bool
	// Cancelled is set when cancellation stopped or cut work short;
	// CancelCause is the context's cause.
	Cancelled   bool
	CancelCause string
	// RecordErrors lists run and batch events that could not be recorded.
	// Target records are reported on their outcome instead.
	RecordErrors []string
	Started      time.Time
	Finished     time.Time

	index map[string]int
}

// Outcome returns the outcome for target.
func (r *Result) Outcome(target string) (Outcome, bool) {
	i, ok := r.index[target]
	if !ok {
		return Outcome{}, false
	}
	return r.Outcomes[i], true
}

// Counts tallies outcomes by status.
func (r *Result) Counts() map[Status]int {
	c := make(map[Status]int)
	for _, o := range r.Outcomes {
		c[o.Status]++
	}
	return c
}

// Err summarises, for a diagnostic, a run that did not finish its job: it
// was aborted, was cancelled, or left targets unsettled. Its first line is
// the headline; each further line concerns one target. Failures within the
// budget are not errors; Warnings reports them.
func (r *Result) Err() error {
	var parts []string
	if r.Aborted {
		h := "aborted: " + r.AbortReason
		if r.RolledBack {
			h += ", targets it changed were rolled back"
		}
		parts = append(parts, h)
	}
	if r.Cancelled {
		parts = append(parts, "cancelled: "+r.CancelCause)
	}
	var details []error
	unsettled := 0
	for _, o := range r.Outcomes {
		unsure := o.Unsettled || o.Status == StatusUnsettled
		if unsure {
			unsettled++
		}
		if o.Error != "" && (unsure || r.Aborted) && o.Status != StatusGone {
			details = append(details, fmt.Errorf("%s: %s", o.Target, o.Error))
		}
	}
	if unsettled > 0 {
		parts = append(parts, fmt.Sprintf("%s left unsettled, the next apply settles them", plural(unsettled, "target")))
	}
	if len(parts) == 0 {
		return nil
	}
	head := fmt.Errorf("rollout of %s: %s; %s", r.Desired, strings.Join(parts, "; "), r.CountsText())
	return errors.Join(append([]error{head}, details...)...)
}

// CountsText says how every target ended, one count per status that occurred, in a fixed
// order ("2 succeeded, 1 lost-contact, 3 not-started"): each target is counted exactly once.
func (r *Result) CountsText() string {
	c := r.Counts()
	var out []string
	for _, st := range statusOrder {
		if n := c[st]; n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(out) == 0 {
		return "no targets"
	}
	return strings.Join(out, ", ")
}

// Warnings lists what went wrong without failing the run: failures within
// the budget, vanished targets and records that could not be written.
func (r *Result) Warnings() []string {
	var out []string
	for _, o := range r.Outcomes {
		switch {
		case o.Status == StatusGone:
			out = append(out, fmt.Sprintf("%s vanished during the rollout: %s", o.Target, o.Error))
		case o.Failed && !r.Aborted && !o.Unsettled:
			out = append(out, fmt.Sprintf("%s failed and was restored to %s (within max_failures %d): %s", o.Target, show(o.Revision), r.MaxFailures, o.Error))
		case o.Status == StatusLostContact && !r.Aborted && !o.Unsettled:
			out = append(out, fmt.Sprintf("%s stopped answering after its change began and was restored to %s (within max_unsettled %d): %s", o.Target, show(o.Revision), r.MaxUnsettled, o.Error))
		}
	}
	for _, e := range r.RecordErrors {
		out = append(out, "could not record: "+e)
	}
	return out
}

// plural writes n with noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
