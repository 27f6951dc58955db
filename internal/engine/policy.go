package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults used when a Policy leaves a duration at zero. They exist so that a
// caller that forgets a timeout gets a bounded wait rather than an apply that
// can hang forever; resources should still set their own.
const (
	DefaultVerifyTimeout   = 5 * time.Minute
	DefaultRollbackTimeout = 10 * time.Minute
)

// limitKind tells how a percentage resolves. The zero value is the failure
// budget so that a zero Limit means "max_failures 0", the documented default.
type limitKind uint8

const (
	kindBudget limitKind = iota // max_failures: percentages round down, may be 0
	kindUpdate                  // update_limit: percentages round up, at least 1
)

// Limit is a parsed update_limit or max_failures: a whole number of targets
// or a percentage of the eligible (not skipped) targets. The zero value is
// max_failures 0; as an update limit PlanRollout treats it as 1.
type Limit struct {
	value   int
	percent bool
	kind    limitKind
}

// Resolve turns the limit into a number of targets out of eligible.
//
// An update_limit percentage rounds up and is at least 1, so that "10%" of 3
// targets still makes progress. A max_failures percentage rounds down, like
// Cluster API's maxUnavailable, because a failure budget should err on the
// side of stopping: "10%" of 5 targets tolerates no failure.
func (l Limit) Resolve(eligible int) int {
	n := l.value
	if l.percent {
		eligible = max(eligible, 0)
		if l.kind == kindUpdate {
			n = (eligible*l.value + 99) / 100
		} else {
			n = eligible * l.value / 100
		}
	}
	if l.kind == kindUpdate {
		n = max(n, 1)
	}
	return n
}

// IsPercent reports whether the limit is a percentage of eligible targets.
func (l Limit) IsPercent() bool { return l.percent }

// String returns the limit in the form it is written: "2" or "25%".
func (l Limit) String() string {
	if l.percent {
		return strconv.Itoa(l.value) + "%"
	}
	return strconv.Itoa(l.value)
}

// ParseLimit parses update_limit: a whole number ≥ 1 ("2") or a percentage
// from 1% to 100% ("25%") of the eligible targets.
func ParseLimit(s string) (Limit, error) {
	l, err := parseLimit(s, 1)
	if err != nil {
		return Limit{}, fmt.Errorf(`update_limit %q: %w; must be a whole number ≥ 1 (e.g. "2") or a percentage from 1%% to 100%% (e.g. "25%%")`, s, err)
	}
	l.kind = kindUpdate
	return l, nil
}

// ParseMaxFailures parses max_failures: a whole number ≥ 0 ("1") or a
// percentage from 0% to 100% ("10%") of the eligible targets.
func ParseMaxFailures(s string) (Limit, error) { return parseBudget("max_failures", s) }

// ParseMaxUnsettled parses max_unsettled: a whole number ≥ 0 ("0") or a percentage from 0% to
// 100% of the eligible targets, counted like max_failures.
func ParseMaxUnsettled(s string) (Limit, error) { return parseBudget("max_unsettled", s) }

// parseBudget parses a budget named name: percentages round down and may be 0.
func parseBudget(name, s string) (Limit, error) {
	l, err := parseLimit(s, 0)
	if err != nil {
		return Limit{}, fmt.Errorf(`%s %q: %w; must be a whole number ≥ 0 (e.g. "1") or a percentage from 0%% to 100%% (e.g. "10%%")`, name, s, err)
	}
	l.kind = kindBudget
	return l, nil
}

// UpdateLimitOf is the update_limit of exactly n targets, for callers whose
// schema holds a number (in-place updates). n below 1 is treated as 1.
func UpdateLimitOf(n int) Limit { return Limit{value: max(n, 1), kind: kindUpdate} }

// MaxFailuresOf is a failure budget of exactly n targets (n below 0 is 0).
func MaxFailuresOf(n int) Limit { return Limit{value: max(n, 0), kind: kindBudget} }

// parseLimit accepts only ASCII digits with an optional trailing '%'. It is
// deliberately stricter than strconv.Atoi: "+2", " 2" and "2.5" are typos in
// configuration, and silently accepting them would hide intent.
func parseLimit(s string, lowest int) (Limit, error) {
	digits, percent := strings.CutSuffix(s, "%")
	if digits == "" {
		return Limit{}, errors.New("no number given")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return Limit{}, errors.New("not a whole number")
		}
	}
	// Anything beyond int32 is certainly a mistake; bounding it also keeps
	// Resolve's multiplication far from overflow.
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return Limit{}, errors.New("number too large")
	}
	v := int(n)
	switch {
	case v < lowest:
		return Limit{}, fmt.Errorf("below %d", lowest)
	case percent && v > 100:
		return Limit{}, errors.New("percentage above 100%")
	}
	return Limit{value: v, percent: percent}, nil
}

// OnFailure is what happens once failures exceed max_failures.
type OnFailure string

const (
	// Rollback restores every target this run changed to its backup.
	Rollback OnFailure = "rollback"
	// Halt stops starting waves and leaves targets that succeeded alone.
	Halt OnFailure = "halt"
)

// ParseOnFailure parses on_failure: "rollback" or "halt".
func ParseOnFailure(s string) (OnFailure, error) {
	switch OnFailure(s) {
	case Rollback, Halt:
		return OnFailure(s), nil
	}
	return "", fmt.Errorf(`on_failure %q: must be "rollback" or "halt"`, s)
}

// Policy says how a rollout proceeds. Build it with the Parse functions.
type Policy struct {
	// UpdateLimit bounds how many targets change at once (the wave size).
	// The zero value means one target at a time.
	UpdateLimit Limit
	// MaxFailures is how many targets may fail before no new wave starts.
	// The zero value means none.
	MaxFailures Limit
	// MaxUnsettled is how many targets may stop answering after their change began (an
	// infrastructure failure once something was applied: StatusLostContact) before no new wave
	// starts. The zero value means none: a cluster that was reachable before its wave and is not
	// after our change is a signal, not noise. Exceeding it halts (nothing is rolled back: the
	// evidence is not against the revision), whatever OnFailure says.
	MaxUnsettled Limit
	// OnFailure is applied once MaxFailures is exceeded. The empty value
	// means Rollback: an apply that gave up should not leave the fleet split
	// between revisions unless the user asked for that with Halt.
	OnFailure OnFailure
	// Canary targets go first, in this order, in waves of their own.
	Canary []string
	// CanaryOptional lets a plan that changes targets go ahead when a canary is not in the
	// canary waves (see Plan.CanaryGaps); by default such a plan is refused.
	CanaryOptional bool
	// VerifyTimeout bounds each verification of a target.
	VerifyTimeout time.Duration
	// BakeTime is waited after a wave is verified, before the wave is
	// verified again and the next wave starts.
	BakeTime time.Duration
	// RollbackTimeout bounds each restore (with its verification) and each
	// record written after cancellation; these run on a fresh context so a
	// cancelled apply still leaves every target recorded.
	RollbackTimeout time.Duration
	// Stages, when set, cut the rollout into ordered steps (after the canary waves): each stage's
	// targets go out in waves of their own, with the stage's own limits and bake time, and a
	// stage whose failures exceed its max_failures stops the run before the next stage starts.
	// A target listed in no stage is left alone (skipped, with the reason).
	Stages []Stage
	// PromoteUntil names the last stage this apply carries the revision to ("" = every stage).
	// The targets of later stages wait, skipped with the reason, for a reviewed change of this
	// one setting.
	PromoteUntil string
	// Irreversible says a change cannot be undone by restoring a backup: in-place machine
	// updates, which Cluster API carries out from the owner's desired state (writing the old
	// version back would be a second update, a downgrade, not a restore). A failed target is
	// then left as it is, counted against MaxFailures and named, never restored; a cancelled
	// one stays in flight for the next run to apply again; a failure is never recorded as the
	// revision's invalidity (the next run verifies again). OnFailure must be Halt (the default
	// then).
	Irreversible bool
}

// Stage is one step of a staged rollout. Its members are target names the caller resolved (from
// a selector or a list); a target listed in more than one stage belongs to the first.
type Stage struct {
	Name    string
	Members []string
	// UpdateLimit and MaxFailures resolve against the stage's eligible targets.
	UpdateLimit Limit
	MaxFailures Limit
	// BakeTime replaces Policy.BakeTime for the stage's waves.
	BakeTime time.Duration
}

// stageIndex returns the 0-based index of the stage named name, or -1.
func (p Policy) stageIndex(name string) int {
	for i, s := range p.Stages {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// Validate reports settings no rollout can run with.
func (p Policy) Validate() error {
	var errs []error
	if p.OnFailure != "" {
		if _, err := ParseOnFailure(string(p.OnFailure)); err != nil {
			errs = append(errs, err)
		}
	}
	if p.Irreversible && p.OnFailure == Rollback {
		errs = append(errs, errors.New(`on_failure "rollback": an irreversible change (in-place machine updates) cannot be rolled back; use "halt"`))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"verify timeout", p.VerifyTimeout}, {"bake time", p.BakeTime}, {"rollback timeout", p.RollbackTimeout}} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s %s: must not be negative", d.name, d.d))
		}
	}
	names := make(map[string]bool, len(p.Stages))
	for _, st := range p.Stages {
		switch {
		case st.Name == "":
			errs = append(errs, errors.New("stages: a stage without a name"))
		case names[st.Name]:
			errs = append(errs, fmt.Errorf("stages: %q named twice", st.Name))
		}
		names[st.Name] = true
		if st.BakeTime < 0 {
			errs = append(errs, fmt.Errorf("stage %q: bake time %s must not be negative", st.Name, st.BakeTime))
		}
	}
	if p.PromoteUntil != "" && !names[p.PromoteUntil] {
		errs = append(errs, fmt.Errorf("promote_until %q: no such stage", p.PromoteUntil))
	}
	seen := make(map[string]bool, len(p.Canary))
	for _, c := range p.Canary {
		switch {
		case c == "":
			errs = append(errs, errors.New("canary: empty target name"))
		case seen[c]:
			errs = append(errs, fmt.Errorf("canary %q: listed twice", c))
		}
		seen[c] = true
	}
	return errors.Join(errs...)
}

// withDefaults fills durations left at zero so that Execute never waits
// without a bound.
func (p Policy) withDefaults() Policy {
	switch {
	case p.Irreversible:
		// Nothing can be rolled back: a policy that skipped Validate still only halts.
		p.OnFailure = Halt
	case p.OnFailure == "":
		p.OnFailure = Rollback
	}
	if p.VerifyTimeout <= 0 {
		p.VerifyTimeout = DefaultVerifyTimeout
	}
	if p.RollbackTimeout <= 0 {
		p.RollbackTimeout = DefaultRollbackTimeout
	}
	p.BakeTime = max(p.BakeTime, 0)
	return p
}
