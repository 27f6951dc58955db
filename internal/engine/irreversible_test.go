package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// stepWorld is a World whose calls are logged and whose Verify fails for the targets in
// failVerify; cancel, when set, is called as target cancelAt is applied.
type stepWorld struct {
	mu         sync.Mutex
	calls      []string
	events     []EventKind
	failVerify map[string]error
	cancelAt   string
	cancel     context.CancelFunc
}

func (w *stepWorld) log(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, s)
}

func (w *stepWorld) Apply(ctx context.Context, target, revision string) error {
	w.log("apply " + target + " " + revision)
	if target == w.cancelAt {
		w.cancel()
		return ctx.Err()
	}
	return nil
}

func (w *stepWorld) Verify(_ context.Context, target, revision string) error {
	w.log("verify " + target + " " + revision)
	return w.failVerify[target]
}

func (w *stepWorld) Restore(_ context.Context, target, revision string) error {
	w.log("restore " + target + " " + revision)
	return nil
}

func (w *stepWorld) Record(_ context.Context, ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev.Kind)
	return nil
}

func (w *stepWorld) restored() []string {
	var out []string
	for _, c := range w.calls {
		if strings.HasPrefix(c, "restore ") {
			out = append(out, c)
		}
	}
	return out
}

func irreversiblePolicy(t *testing.T, canary ...string) Policy {
	return Policy{UpdateLimit: mustLimit(t, "1"), Irreversible: true, Canary: canary}
}

// An irreversible change (in-place machine updates) that fails verification on a target: the
// target is counted and named, never restored, never recorded invalid, and with no budget left
// no further wave starts (halt).
func TestIrreversibleFailureHaltsWithoutRestore(t *testing.T) {
	targets := []Target{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d", Record: TargetRecord{Current: "ip-2"}}}
	pol := irreversiblePolicy(t, "b")
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	plan := PlanRollout(targets, "ip-2", pol)
	if got := plan.Waves; len(got) != 3 || got[0][0] != "b" {
		t.Fatalf("waves %v, want b (canary) first, then a, c", got)
	}
	w := &stepWorld{failVerify: map[string]error{"a": Mark(ErrRevisionFailed, errors.New("machine m-a not up to date"))}}
	res := Execute(context.Background(), plan, w, NewFakeClock(time.Unix(0, 0)), pol)
	wantStatus(t, res, map[string]Status{"b": StatusSucceeded, "a": StatusFailed, "c": StatusNotStarted, "d": StatusAlreadyCurrent})
	if r := w.restored(); len(r) > 0 {
		t.Errorf("restored %v: an irreversible change is never restored", r)
	}
	if o, _ := res.Outcome("a"); o.Invalid || !o.Failed || !strings.Contains(o.Error, "m-a") {
		t.Errorf("a: %+v; want failed, named, not invalid", o)
	}
	if slices.Contains(w.events, EventInvalid) || slices.Contains(w.events, EventRestored) {
		t.Errorf("events %v: nothing recorded invalid or restored", w.events)
	}
	if !res.Aborted || res.RolledBack || res.Err() == nil {
		t.Errorf("aborted %v, rolled back %v, err %v", res.Aborted, res.RolledBack, res.Err())
	}
}

// Cancelled mid-change, the target is left in flight (unsettled, for the next run), not
// restored.
func TestIrreversibleCancelLeavesInFlight(t *testing.T) {
	pol := irreversiblePolicy(t)
	plan := PlanRollout([]Target{{Name: "a"}, {Name: "b"}}, "ip-2", pol)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &stepWorld{cancelAt: "a", cancel: cancel}
	res := Execute(ctx, plan, w, NewFakeClock(time.Unix(0, 0)), pol)
	wantStatus(t, res, map[string]Status{"a": StatusUnsettled, "b": StatusNotStarted})
	if r := w.restored(); len(r) > 0 {
		t.Errorf("restored %v after cancellation", r)
	}
	if !res.Cancelled {
		t.Error("not reported cancelled")
	}
}

// A target an earlier run left applying another revision is applied the desired one again, not
// restored first; rollback is refused by Validate.
func TestIrreversiblePlanAndValidate(t *testing.T) {
	pol := irreversiblePolicy(t)
	plan := PlanRollout([]Target{{Name: "a", Record: TargetRecord{Provisioning: "ip-1", Backup: "ip-0", RollingBack: true}}}, "ip-2", pol)
	if in := plan.Intents["a"]; in.Action != ActionApply || len(plan.Resume) != 0 || len(plan.Waves) != 1 {
		t.Errorf("intent %+v, resume %v, waves %v; want applied again in a wave", in, plan.Resume, plan.Waves)
	}
	pol.OnFailure = Rollback
	if err := pol.Validate(); err == nil || !strings.Contains(err.Error(), "halt") {
		t.Errorf("Validate with rollback: %v", err)
	}
}
