package engine

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// stagedPolicy has stages eu (eu-1..eu-3, update_limit 2, max_failures 0, bake 1m) and us
// (us-1..us-4, update_limit 50%, max_failures 1, bake 0), the rollout tolerating 10 failures.
func stagedPolicy(t *testing.T, promoteUntil string) Policy {
	p := policy(t, "1", "10", Rollback, 30*time.Second)
	mf1, _ := ParseMaxFailures("1")
	p.Stages = []Stage{
		{Name: "eu", Members: []string{"eu-1", "eu-2", "eu-3"}, UpdateLimit: mustLimit(t, "2"), BakeTime: time.Minute},
		{Name: "us", Members: []string{"us-1", "us-2", "us-3", "us-4", "eu-1"}, UpdateLimit: mustLimit(t, "50%"), MaxFailures: mf1},
	}
	p.PromoteUntil = promoteUntil
	return p
}

func TestPlanStages(t *testing.T) {
	names := []string{"us-4", "eu-2", "ap-1", "us-1", "eu-1", "us-3", "eu-3", "us-2", "can"}
	t.Run("every stage", func(t *testing.T) {
		pol := stagedPolicy(t, "")
		pol.Canary = []string{"can"}
		p := PlanRollout(targets(names...), "r2", pol)
		want := [][]string{{"can"}, {"eu-1", "eu-2"}, {"eu-3"}, {"us-1", "us-2"}, {"us-3", "us-4"}}
		if !slices.EqualFunc(p.Waves, want, slices.Equal) {
			t.Fatalf("waves %v, want %v", p.Waves, want)
		}
		// eu-1 is listed in both stages: the first wins.
		if st := p.Intents["eu-1"].Stage; st != 1 {
			t.Errorf("eu-1 in stage %d, want 1", st)
		}
		if p.Intents["can"].Stage != 0 || !p.Intents["can"].Canary {
			t.Errorf("canary intent %+v", p.Intents["can"])
		}
		if got := []int{p.Stages[0].UpdateLimit, p.Stages[0].Waves, p.Stages[1].UpdateLimit, p.Stages[1].MaxFailures, p.Stages[1].Waves}; !slices.Equal(got, []int{2, 2, 2, 1, 2}) {
			t.Errorf("stage limits and waves %v", got)
		}
		if in := p.Intents["ap-1"]; in.Action != ActionSkip || in.Reason != "in no stage" || !slices.Equal(p.Unstaged, []string{"ap-1"}) {
			t.Errorf("ap-1: %+v, unstaged %v", in, p.Unstaged)
		}
		if got := p.StagesText(); got != "1 cluster in no stage is left alone" {
			t.Errorf("StagesText %q", got)
		}
		text := p.WavesText("")
		for _, want := range []string{"wave 1 (canary): can", "wave 2 (stage eu): eu-1, eu-2", "wave 5 (stage us): us-3, us-4", "in no stage"} {
			if !strings.Contains(text, want) {
				t.Errorf("WavesText lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("promote until the first stage", func(t *testing.T) {
		ts := with(targets(names...), "us-2", func(t *Target) { t.Record.Current = "r2" }) // already on it
		ts = with(ts, "us-3", func(t *Target) { t.SkipReason = "paused" })
		ts = with(ts, "us-4", func(t *Target) { t.Record.Provisioning = "r3" }) // an earlier run stopped
		p := PlanRollout(ts, "r2", stagedPolicy(t, "eu"))
		want := [][]string{{"eu-1", "eu-2"}, {"eu-3"}}
		if !slices.EqualFunc(p.Waves, want, slices.Equal) {
			t.Fatalf("waves %v, want %v", p.Waves, want)
		}
		if got := p.Stages[1].Waiting; !slices.Equal(got, []string{"us-1", "us-4"}) {
			t.Errorf("waiting %v", got)
		}
		if in := p.Intents["us-1"]; in.Action != ActionSkip || in.Reason != `waits for stage us (promote_until = "eu")` {
			t.Errorf("us-1: %+v", in)
		}
		// The interrupted run is still settled; only the change waits.
		if in := p.Intents["us-4"]; in.Action != ActionRestore || !slices.Contains(p.Resume, "us-4") || in.Wave != 0 {
			t.Errorf("us-4: %+v, resume %v", in, p.Resume)
		}
		if p.Intents["us-2"].Action != ActionAlreadyCurrent || p.Intents["us-3"].Reason != "paused" {
			t.Errorf("us-2 %+v, us-3 %+v", p.Intents["us-2"], p.Intents["us-3"])
		}
		if got, want := p.StagesText(), "stops after stage eu: 2 clusters wait for stage us; 2 clusters in no stage are left alone"; got != want {
			t.Errorf("StagesText %q, want %q", got, want)
		}
		for _, n := range p.Notes {
			if strings.HasPrefix(n, "skip us-1") {
				t.Errorf("waiting clusters are counted, not listed: %q", n)
			}
		}
	})
	t.Run("follow keeps the stages", func(t *testing.T) {
		pol := stagedPolicy(t, "eu")
		p := PlanRollout(targets(names...), "r2", pol)
		f := PlanRollout(targets(names...), "r2", pol).Follow(p.Waves, pol)
		if !slices.EqualFunc(f.Waves, p.Waves, slices.Equal) || f.Intents["eu-3"].Stage != 1 || f.StagesText() != p.StagesText() {
			t.Errorf("follow: waves %v, stages text %q", f.Waves, f.StagesText())
		}
	})
}

func TestStagesValidate(t *testing.T) {
	p := stagedPolicy(t, "ap")
	p.Stages = append(p.Stages, Stage{Name: "eu"}, Stage{Name: "", BakeTime: -time.Second})
	err := p.Validate()
	for _, want := range []string{`promote_until "ap": no such stage`, `stages: "eu" named twice`, "a stage without a name", "must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	if err := stagedPolicy(t, "us").Validate(); err != nil {
		t.Errorf("valid staged policy: %v", err)
	}
}

// A stage that fails beyond its own max_failures stops the run before the next stage, although
// the rollout's budget (10) is far from spent; on_failure then rolls back what this run changed.
func TestExecuteStageBudgetBlocksLaterStages(t *testing.T) {
	ts := withFaults(specs("eu-1", "eu-2", "eu-3", "us-1", "us-2", "us-3", "us-4"), "eu-3", func(s *simSpec) { s.faults.verifyFails = true })
	_, res, _ := simulate(t, scenario{name: "stage budget", policy: stagedPolicy(t, ""), targets: ts})
	if !res.Aborted || !strings.Contains(res.AbortReason, "stage eu: 1 failure, more than its max_failures 0; later stages do not start") {
		t.Fatalf("aborted %v: %q", res.Aborted, res.AbortReason)
	}
	wantStatus(t, res, map[string]Status{"eu-1": StatusRolledBack, "eu-2": StatusRolledBack, "us-1": StatusNotStarted, "us-4": StatusNotStarted})

	// Within its budget (us tolerates one failure) the stage goes on and the run completes.
	ts = withFaults(specs("eu-1", "eu-2", "eu-3", "us-1", "us-2", "us-3", "us-4"), "us-1", func(s *simSpec) { s.faults.verifyFails = true })
	_, res, _ = simulate(t, scenario{name: "within stage budget", policy: stagedPolicy(t, ""), targets: ts})
	if res.Aborted {
		t.Fatalf("aborted: %s", res.AbortReason)
	}
	wantStatus(t, res, map[string]Status{"us-4": StatusSucceeded})
}

// Each stage's waves bake for the stage's own bake time.
func TestExecuteStageBakeTime(t *testing.T) {
	pol := stagedPolicy(t, "")
	pol.Stages[1].BakeTime = 0
	_, res, w := simulate(t, scenario{name: "stage bake", policy: pol, targets: specs("eu-1", "eu-2", "eu-3", "us-1", "us-2")})
	if res.Aborted {
		t.Fatal(res.AbortReason)
	}
	// Two eu waves bake a minute each, the us wave not at all: the run takes at least two
	// minutes and well under three (verifications take milliseconds in the simulation).
	if d := res.Finished.Sub(res.Started); d < 2*time.Minute || d >= 3*time.Minute {
		t.Errorf("run took %s, want two bakes of a minute", d)
	}
	_ = w
}
