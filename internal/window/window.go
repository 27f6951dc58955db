// Package window is the maintenance window of a cluster or a rollout: a cron schedule of
// starts (github.com/robfig/cron/v3), a duration and a time zone, judged at a time the caller
// gives (never the wall clock), so that plan and apply judge it the same way and tests drive it
// with a fake clock.
package window

import (
	"errors"
	"fmt"
	"strings"
	"time"
	// The time zone database is embedded so that a window names the same zone on every machine
	// the provider runs on, whether or not it has /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Annotation is the Cluster annotation that gives a cluster its own maintenance window:
// "<cron>;<duration>[;<time zone>]", e.g. "0 2 * * 6;4h;Europe/Berlin" (the time zone is UTC
// when left out).
const Annotation = "gradual.dev/maintenance-window"

// A window whose starts overlap (one every hour, open for two) stays open across them. Closes
// follows them for at most maxMerge steps, each to the latest start before the close, and stops
// once the close is horizon away (more than the longest duration): a window that starts every
// minute and lasts a day never closes, and is reported open at least that long.
const (
	maxMerge = 64
	horizon  = 8 * 24 * time.Hour
)

// Window is a parsed maintenance window: it opens at each start of its schedule, in its time
// zone, and stays open for its duration.
type Window struct {
	spec     string
	schedule *cron.SpecSchedule
	duration time.Duration
	zone     *time.Location
}

// FieldError is a window setting that cannot be used: Field names it ("schedule", "duration"
// or "time_zone").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// cronParser accepts the five standard fields and the @daily-style descriptors; seconds are not
// a maintenance window's unit.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// New parses a window from its three settings. An empty timeZone is UTC.
func New(schedule, duration, timeZone string) (Window, error) {
	sched, err := ParseSchedule(schedule)
	if err != nil {
		return Window{}, &FieldError{Field: "schedule", Err: err}
	}
	d, err := ParseDuration(duration)
	if err != nil {
		return Window{}, &FieldError{Field: "duration", Err: err}
	}
	zone, err := ParseTimeZone(timeZone)
	if err != nil {
		return Window{}, &FieldError{Field: "time_zone", Err: err}
	}
	// A copy: the schedule judges its starts in the window's zone.
	s := *sched
	s.Location = zone
	return Window{spec: strings.TrimSpace(schedule), schedule: &s, duration: d, zone: zone}, nil
}

// ParseSchedule parses a cron expression of five fields (minute hour day-of-month month
// day-of-week) or a descriptor (@daily, @weekly...). The time zone is a setting of its own, so a
// CRON_TZ= or TZ= prefix is refused, and so is @every, which has no fixed starts.
func ParseSchedule(spec string) (*cron.SpecSchedule, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "":
		return nil, errors.New("empty cron expression")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, fmt.Errorf("%q: give the time zone in its own setting, not as a prefix of the cron expression", spec)
	case strings.HasPrefix(spec, "@every"):
		return nil, fmt.Errorf("%q: @every has no fixed starts; use five cron fields (minute hour day-of-month month day-of-week)", spec)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%q is not a cron expression of five fields (minute hour day-of-month month day-of-week): %w", spec, err)
	}
	sched, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%q has no fixed starts", spec)
	}
	return sched, nil
}

// ParseDuration parses a positive Go duration ("4h", "90m", "1h30m") of at most a week.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"4h\" or \"90m\"", s)
	}
	if d <= 0 || d > 7*24*time.Hour {
		return 0, fmt.Errorf("%q must be more than 0 and at most 168h", s)
	}
	return d, nil
}

// ParseTimeZone parses an IANA time zone name ("Europe/Berlin", "UTC"); empty is UTC. "Local"
// is refused: it would mean whatever machine runs Terraform.
func ParseTimeZone(s string) (*time.Location, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.UTC, nil
	}
	if s == "Local" {
		return nil, errors.New(`"Local" depends on the machine running Terraform; name an IANA time zone such as "Europe/Berlin" or "UTC"`)
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone name such as \"Europe/Berlin\" or \"UTC\"", s)
	}
	return loc, nil
}

// ParseAnnotation parses the value of the Annotation: "<cron>;<duration>[;<time zone>]".
func ParseAnnotation(value string) (Window, error) {
	parts := strings.Split(value, ";")
	if len(parts) < 2 || len(parts) > 3 {
		return Window{}, fmt.Errorf("%q is not \"<cron>;<duration>[;<time zone>]\", e.g. \"0 2 * * 6;4h;Europe/Berlin\"", value)
	}
	zone := ""
	if len(parts) == 3 {
		zone = parts[2]
	}
	return New(parts[0], parts[1], zone)
}

// String says what the window is: "0 2 * * * for 4h (Europe/Berlin)".
func (w Window) String() string {
	return fmt.Sprintf("%s for %s (%s)", w.spec, shortDuration(w.duration), w.zone)
}

// Duration is how long the window stays open after each start.
func (w Window) Duration() time.Duration { return w.duration }

// State is a window as judged at one time.
type State struct {
	// Open says the window is open.
	Open bool
	// Closes, when Open, is when it closes (starts that begin before it closes extend it; past
	// a thousand of them it is at least this late).
	Closes time.Time
	// Next, when not Open, is when it opens next; zero when the schedule has no start within
	// five years (cron's horizon, e.g. "0 0 30 2 *").
	Next time.Time
}

// At judges the window at now. It is open when a start s has s <= now < s + duration.
func (w Window) At(now time.Time) State {
	now = now.In(w.zone)
	// The first start after now - duration: the only one that may have begun and still be
	// open, or else the next one.
	start := w.schedule.Next(now.Add(-w.duration))
	if start.IsZero() || start.After(now) {
		return State{Next: start}
	}
	closes := start.Add(w.duration)
	for range maxMerge {
		latest, ok := w.latestStart(closes)
		if !ok || !latest.Add(w.duration).After(closes) || closes.Sub(now) > horizon {
			break
		}
		closes = latest.Add(w.duration)
	}
	return State{Open: true, Closes: closes}
}

// latestStart is the latest start in (t - duration, t]: the one whose end is the latest among
// those that begin before t. Starts are whole minutes apart, so the smallest j (in minutes) for
// which the first start after t - j is at or before t finds it; that is monotone in j, so it is
// a binary search of a few cron lookups, not a walk over every start.
func (w Window) latestStart(t time.Time) (time.Time, bool) {
	within := func(j time.Duration) (time.Time, bool) {
		s := w.schedule.Next(t.Add(-j))
		return s, !s.IsZero() && !s.After(t)
	}
	if _, ok := within(w.duration); !ok {
		return time.Time{}, false
	}
	lo, hi := int64(0), int64((w.duration+time.Minute-1)/time.Minute) // in minutes: within(hi) holds
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, ok := within(time.Duration(mid) * time.Minute); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	j := min(time.Duration(hi)*time.Minute, w.duration)
	return within(j)
}

// shortDuration prints d without zero units: "4h", "1h30m", "90s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
