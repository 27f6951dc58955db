package delivery

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// TestRunReadsTheFleet: a run reads the fleet (lists the picked Clusters, then reads their
// records) twice: under its Lease before it changes anything, and once it settled, for the
// state (RunResult.After), which the resource takes instead of reading again. A caller that
// reads the fleet itself after several runs (an assignment's modules) asks for the first
// only (NoReadBack), and gets that read as After.
func TestRunReadsTheFleet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		noReadBack bool
		reads      int32
		after      func(e *env) string // the revision After shows on c1
	}{
		{"read back", false, 2, func(e *env) string { return e.desired.revision }},
		{"the caller reads back", true, 1, func(e *env) string { return e.old.revision }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}})
				var reads atomic.Int32
				discover := e.svc.discover
				e.svc.discover = func(ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
					if len(q.Names) == 0 {
						reads.Add(1)
					}
					return discover(ctx, q)
				}
				run, err := e.svc.Run(context.Background(), RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}, NoReadBack: tc.noReadBack})
				if err != nil {
					t.Fatal(err)
				}
				if got := reads.Load(); got != tc.reads {
					t.Errorf("the run read the fleet %d times, want %d", got, tc.reads)
				}
				if got, want := run.After.Clusters["c1"].Revision, tc.after(e); got != want {
					t.Errorf("After shows c1 on %q, want %q", got, want)
				}
			})
		})
	}
}
