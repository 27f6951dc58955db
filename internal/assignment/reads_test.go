package assignment

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// readsOfRun is how many times delivery's Run reads the fleet (delivery's TestRunReadsTheFleet
// pins it): once under its Lease before it changes anything, and once after it settled unless
// the caller reads it back itself.
func readsOfRun(req delivery.RunRequest) int {
	if req.NoReadBack {
		return 1
	}
	return 2
}

// TestRunReadsTheFleetOnceAfter: one apply of an assignment of M modules reads the fleet (an
// observation of one module: its Clusters listed, their records read) 3M times: M as it starts
// (prepare), M as each module's run starts under its Lease, and M once at its end, after
// every module and the letting go, for the state (RunResult.After), which the resource takes
// instead of reading again. Before, each module's run read the fleet back too and the
// resource read it again after the run: 4M.
func TestRunReadsTheFleetOnceAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFleet(t, worldSpec(t, Reconcile, worldPolicy(10, 0, engine.Halt)))
		for _, c := range []string{"c1", "c2", "c3", "c4"} {
			f.add(c)
			f.start(c, startOld)
		}
		req := f.plan()
		f.reads = 0
		a := f.apply(req)
		if a.err != nil {
			t.Fatal(a.err)
		}
		m := len(f.spec.Modules)
		if f.reads != 3*m {
			t.Errorf("M=%d modules: the apply read the fleet %d times, want %d", m, f.reads, 3*m)
		}
		// After is what a read after the run finds (what the resource read itself before).
		want, err := observe(context.Background(), f, fleet.Query{Namespace: f.spec.ClusterNamespace}, f.spec, false)
		if err != nil {
			t.Fatal(err)
		}
		if a.res.After == nil || !reflect.DeepEqual(Status(a.res.After, f.spec), Status(want, f.spec)) {
			t.Errorf("After:\n%+v\nwant what a read after the run finds:\n%+v", a.res.After, want)
		}
		for _, cs := range Status(a.res.After, f.spec) {
			if cs.State != StateCurrent {
				t.Errorf("After shows %s %s (%s), want current", cs.Name, cs.State, cs.Detail)
			}
		}
	})
}

// A run refused before it changed anything (here: a canary that is not available) returns the
// fleet as it read it at its start as After, and reads it no more.
func TestRunRefusedKeepsItsFirstRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := worldSpec(t, Reconcile, worldPolicy(10, 0, engine.Halt))
		spec.Policy.Canary = []string{"c1"}
		f := newFakeFleet(t, spec)
		f.add("c1").skip = "not ready"
		f.add("c2")
		f.reads = 0
		a := f.applyUnchecked(RunRequest{})
		if a.err == nil || !strings.Contains(a.err.Error(), "Canary Not Available") {
			t.Fatalf("error %v, want the run refused: canary not available", a.err)
		}
		if m := len(f.spec.Modules); f.reads != m {
			t.Errorf("the refused run read the fleet %d times, want %d (once, as it started)", f.reads, m)
		}
		if a.res == nil || a.res.After == nil || a.res.After != a.r.obs {
			t.Errorf("After %+v, want the run's first read", a.res)
		}
	})
}
