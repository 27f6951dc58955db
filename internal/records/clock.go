package records

import (
	"context"
	"time"
)

// Clock tells the time. Stores stamp records with it and Leases expire by it, so tests inject a
// fake one (the engine's clocks satisfy it).
type Clock interface {
	Now() time.Time
}

// Sleeper is a Clock that can also wait. A Lease waits (renewals, watching another holder's
// Lease) with the clock's Sleep when it has one, and on the wall clock otherwise; the engine's
// clocks have one, so a fake clock drives a Lease in tests.
type Sleeper interface {
	Clock
	// Sleep waits for d, or until ctx is done, in which case it returns the context's cause.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d on the wall clock, or until ctx is done.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// sleep waits for d on clock when it is a Sleeper, else on the wall clock.
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if s, ok := clock.(Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	return SystemClock{}.Sleep(ctx, d)
}

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
