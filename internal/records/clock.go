package records

import (
	"context"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// Clock tells the time. Stores stamp records with it and Leases expire by it, so tests inject a
// fake one. A Lease waits (renewals, watching another holder's Lease) with the clock's Sleep when
// it is a clock.Sleeper, and on the wall clock otherwise.
type Clock = clock.Reader

// SystemClock is the wall clock.
type SystemClock = clock.System

// sleep waits for d on c when it can wait, else on the wall clock.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if s, ok := c.(clock.Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	return clock.Sleep(ctx, d)
}

// outlive is clock.Outlive on c when c makes timeouts (a clock.Clock, such as a test's Fake),
// else on the wall clock.
func outlive(ctx context.Context, c Clock, grace time.Duration) (context.Context, context.CancelFunc) {
	t, ok := c.(clock.Clock)
	if !ok {
		t = clock.System{}
	}
	return clock.Outlive(ctx, t, grace)
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
