package records

import "time"

// Clock tells the time. Stores stamp records with it and Leases expire by it, so tests inject a
// fake one (the engine's clocks satisfy it).
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

func clockOrSystem(c Clock) Clock {
	if c == nil {
		return SystemClock{}
	}
	return c
}

// stamp formats a record time: UTC, RFC 3339 with nanoseconds, so the order of two records
// written within a second is kept.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseStamp(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
