package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// The no-change plan is timed once the machine has settled: right after an apply through Flux
// at 1,000 Clusters, Flux's controllers and the bed's API servers kept both cores busy for a
// while, and a plan timed then measured them (20.2 s) more than the plan (3.5-4.5 s on the same
// bed left alone). settle waits until the machine is at most settleBusy busy over a
// settleWindow, for at most settleMax, and the CSV says how busy it still was.
const (
	settleBusy   = 0.5 // of all cores: one of two
	settleWindow = 2 * time.Second
	settleMax    = 90 * time.Second
)

// settled is what settle found: how long it waited and the machine's busy fraction over the
// last window before the plan.
type settled struct {
	waited time.Duration
	busy   float64
}

func settle(ctx context.Context, read func() (busy, total uint64, err error)) (settled, error) {
	start := clock.System{}.Now()
	for {
		b0, t0, err := read()
		if err != nil {
			return settled{}, err
		}
		select {
		case <-ctx.Done():
			return settled{}, ctx.Err()
		case <-time.After(settleWindow):
		}
		b1, t1, err := read()
		if err != nil {
			return settled{}, err
		}
		s := settled{waited: time.Since(start), busy: busyFraction(b0, t0, b1, t1)}
		if s.busy <= settleBusy || s.waited >= settleMax {
			return s, nil
		}
	}
}

// busyFraction is the share of CPU time between two readings of /proc/stat that was not idle.
func busyFraction(b0, t0, b1, t1 uint64) float64 {
	if t1 <= t0 {
		return 0
	}
	return float64(b1-b0) / float64(t1-t0)
}

// procStat reads the machine's CPU counters (all cores) from /proc/stat: busy (everything but
// idle and iowait) and total, in clock ticks.
func procStat() (busy, total uint64, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseProcStat(string(raw))
}

func parseProcStat(raw string) (busy, total uint64, err error) {
	line, _, _ := strings.Cut(raw, "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var idle uint64
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total - idle, total, nil
}
