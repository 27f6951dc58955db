package engine

import "github.com/gradual-dev/terraform-provider-gradual/internal/clock"

// The engine's only source of time is internal/clock: bake times, verify timeouts and rollback
// timeouts go through a Clock, so tests run them instantly on a fake one. These names keep the
// engine's API readable on its own.
type (
	// Clock is clock.Clock.
	Clock = clock.Clock
	// SystemClock is the wall clock.
	SystemClock = clock.System
	// FakeClock is a clock whose time moves only when told to.
	FakeClock = clock.Fake
)

// NewFakeClock returns a fake clock reading start.
var NewFakeClock = clock.NewFake
