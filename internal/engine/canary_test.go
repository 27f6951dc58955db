package engine

import (
	"strings"
	"testing"
)

func TestCanaryGapsNameEachMissingCanaryAndWhy(t *testing.T) {
	ts := targets("a", "b", "c", "d")
	ts[1].SkipReason = "control plane not ready" // b: skipped
	ts[2].Record = TargetRecord{Current: "r2"}   // c: already runs the revision
	policy := Policy{UpdateLimit: Limit{value: 1, kind: kindUpdate}, Canary: []string{"a", "b", "c", "ghost", "a"}}
	p := PlanRollout(ts, "r2", policy)
	gaps := p.CanaryGaps(policy)
	var got []string
	for _, g := range gaps {
		got = append(got, g.Name+"="+g.Reason)
	}
	joined := strings.Join(got, "; ")
	if len(gaps) != 2 || gaps[0].Name != "b" || !strings.Contains(gaps[0].Reason, "control plane not ready") ||
		gaps[1].Name != "ghost" || !strings.Contains(gaps[1].Reason, "not a cluster") {
		t.Fatalf("gaps = %s; want b (skipped) and ghost (unknown); a is in the canary wave, c already runs r2", joined)
	}
	policy.CanaryOptional = true
	if gaps := p.CanaryGaps(policy); gaps != nil {
		t.Fatalf("canary_optional, yet gaps %v", gaps)
	}
	// Nothing to run: no gap, whatever the canaries are.
	policy.CanaryOptional = false
	current := targets("a", "b")
	for i := range current {
		current[i].Record.Current = "r2"
	}
	if gaps := PlanRollout(current, "r2", Policy{Canary: []string{"ghost"}}).CanaryGaps(Policy{Canary: []string{"ghost"}}); gaps != nil {
		t.Fatalf("a plan with no wave reported gaps %v", gaps)
	}
}

// A canary the reviewed plan put first but that went not ready before apply: Follow leaves it
// out, and the first wave left would be the fleet's. CanaryGaps must see that on the followed
// plan, so that apply refuses it as plan would have.
func TestCanaryGapsSeeACanaryFollowLeftOut(t *testing.T) {
	policy := Policy{UpdateLimit: Limit{value: 1, kind: kindUpdate}, Canary: []string{"a"}}
	planned := PlanRollout(targets("a", "b", "c"), "r2", policy)
	if gaps := planned.CanaryGaps(policy); gaps != nil {
		t.Fatalf("at plan time: %v", gaps)
	}
	now := targets("a", "b", "c")
	now[0].SkipReason = "paused"
	followed := PlanRollout(now, "r2", policy).Follow(planned.Waves, policy)
	if len(followed.Waves) == 0 || followed.Waves[0][0] != "b" {
		t.Fatalf("followed waves %v: the premise (b goes first) does not hold", followed.Waves)
	}
	gaps := followed.CanaryGaps(policy)
	if len(gaps) != 1 || gaps[0].Name != "a" || !strings.Contains(gaps[0].Reason, "paused") {
		t.Fatalf("gaps = %v, want a (paused)", gaps)
	}
}
