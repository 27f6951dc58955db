package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// holdWorld is a stepWorld that is also a Holder: applying closeAfter closes the windows of
// the targets in closes (time passed while the wave ran).
type holdWorld struct {
	stepWorld
	closeAfter string
	closes     []string
	closed     map[string]bool
}

func (w *holdWorld) Apply(ctx context.Context, target, revision string) error {
	if target == w.closeAfter {
		w.mu.Lock()
		for _, name := range w.closes {
			w.closed[name] = true
		}
		w.mu.Unlock()
	}
	return w.stepWorld.Apply(ctx, target, revision)
}

func (w *holdWorld) Held(target string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed[target] {
		return "outside its maintenance window"
	}
	return ""
}

// A target whose window closed while an earlier wave ran is held back when its wave starts:
// never applied, nothing recorded for it, skipped with the reason; the others of its wave go on.
func TestHeldTargetsAreNotStarted(t *testing.T) {
	pol := Policy{UpdateLimit: mustLimit(t, "2"), VerifyTimeout: time.Second}
	plan := PlanRollout([]Target{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}, "r2", pol)
	if len(plan.Waves) != 2 {
		t.Fatalf("waves %v, want two of two", plan.Waves)
	}
	second := plan.Waves[1]
	w := &holdWorld{closeAfter: plan.Waves[0][0], closes: second[:1], closed: map[string]bool{}}
	res := Execute(context.Background(), plan, w, NewFakeClock(time.Unix(0, 0)), pol)
	held, went := second[0], second[1]
	o, _ := res.Outcome(held)
	if o.Status != StatusSkipped || !strings.Contains(o.Error, "outside its maintenance window") {
		t.Errorf("%s: %+v, want skipped with the reason", held, o)
	}
	if slices.ContainsFunc(w.calls, func(c string) bool { return strings.Contains(c, " "+held+" ") }) {
		t.Errorf("calls %v: %s was touched", w.calls, held)
	}
	if o, _ := res.Outcome(went); o.Status != StatusSucceeded {
		t.Errorf("%s: %+v, want succeeded", went, o)
	}
	if res.Err() != nil {
		t.Errorf("err %v: a held target is no failure", res.Err())
	}
}
