package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// The goal for both: under 50 ms and 50 MB per 10,000-target run.
const benchTargets = 10_000

func benchFleet() []Target {
	ts := make([]Target, benchTargets)
	for i := range ts {
		// Reverse order so that planning really sorts.
		ts[i] = Target{Name: fmt.Sprintf("cluster-%05d", benchTargets-i), Record: TargetRecord{Current: "r1", Backup: "r0"}}
	}
	return ts
}

func benchPolicy(b *testing.B) Policy {
	b.Helper()
	return Policy{UpdateLimit: mustLimit(b, "100"), OnFailure: Rollback, Canary: []string{"cluster-00042", "cluster-09999"}}
}

func BenchmarkPlan(b *testing.B) {
	ts, pol := benchFleet(), benchPolicy(b)
	b.ReportAllocs()
	for b.Loop() {
		p := PlanRollout(ts, "r2", pol)
		if len(p.Waves) != 101 { // one canary wave, then 100 of 100
			b.Fatalf("%d waves", len(p.Waves))
		}
	}
}

// zeroWorld answers at once and only counts what it is asked.
type zeroWorld struct{ applied, records atomic.Int64 }

func (w *zeroWorld) Apply(context.Context, string, string) error {
	w.applied.Add(1)
	return nil
}
func (w *zeroWorld) Verify(context.Context, string, string) error  { return nil }
func (w *zeroWorld) Restore(context.Context, string, string) error { return nil }
func (w *zeroWorld) Record(context.Context, Event) error {
	w.records.Add(1)
	return nil
}

func BenchmarkExecute(b *testing.B) {
	pol := benchPolicy(b)
	plan := PlanRollout(benchFleet(), "r2", pol)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var w zeroWorld
		res := Execute(ctx, plan, &w, SystemClock{}, pol)
		if w.applied.Load() != benchTargets || res.Err() != nil {
			b.Fatalf("%d applied, err %v", w.applied.Load(), res.Err())
		}
	}
}
