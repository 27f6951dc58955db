package fleetupdate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
)

// The plan made at apply against what Terraform showed: a machine shown in place that is now
// blocked or given to other extensions makes the plan stale; anything else does not.
func TestStaleMachines(t *testing.T) {
	version := []inplace.Field{{Object: inplace.KindMachine, Path: "/spec/version"}}
	shown := map[string]Shown{
		"a": {Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}},
		"b": {Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}},
		"c": {Strategy: inplace.StrategyUnchanged},
	}
	same := inplace.Plan{Machines: []inplace.MachinePlan{
		{Machine: "a", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}},
		{Machine: "b", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}},
		{Machine: "c", Strategy: inplace.StrategyUnchanged},
		{Machine: "d", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}}, // new: not shown, not stale
	}}
	if got := staleMachines(shown, same); len(got) != 0 {
		t.Errorf("same plan is stale: %v", got)
	}
	now := inplace.Plan{Machines: []inplace.MachinePlan{
		{Machine: "a", Strategy: inplace.StrategyBlocked, Uncovered: version},
		{Machine: "b", Strategy: inplace.StrategyInPlace, Extensions: []string{"other"}},
	}}
	got := staleMachines(shown, now)
	if len(got) != 2 || !strings.Contains(got[0], "machine a: planned in place by ext, now blocked (no extension covers machine spec.version)") ||
		!strings.Contains(got[1], "machine b: planned in place by ext, now by other") {
		t.Errorf("stale: %q", got)
	}
	if got := staleMachines(nil, now); got != nil {
		t.Errorf("nothing shown, yet compared: %v", got)
	}
}

// ownerFake plans what it is given and counts the executions.
type ownerFake struct {
	plan     inplace.Plan
	executed int
}

func (f *ownerFake) Plan(_ context.Context, req owners.Request) (*owners.PlanResult, error) {
	return &owners.PlanResult{Request: req, Revision: "r1", Plan: f.plan}, nil
}

func (f *ownerFake) Execute(context.Context, *owners.PlanResult, ownerupdate.ExecuteRequest) (*ownerupdate.Execution, error) {
	f.executed++
	return &ownerupdate.Execution{Status: map[string]string{"a": "updated"}}, nil
}

// Apply of the single-owner form writes nothing when the plan went stale, and carries out one
// that did not.
func TestApplyRefusesAStaleOwnerPlan(t *testing.T) {
	f := &ownerFake{plan: inplace.Plan{Machines: []inplace.MachinePlan{{Machine: "a", Strategy: inplace.StrategyRolling, Notes: []string{"extension gone"}}}}}
	s := &Service{OwnerPlanner: f, OwnerUpdater: f}
	shown := map[string]Shown{"a": {Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}}}
	one := Spec{Owner: &owners.Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md"}}
	out, err := s.Apply(t.Context(), ApplyRequest{Spec: one, Shown: shown})
	var stale *StaleError
	if !errors.As(err, &stale) || out == nil || out.Owner == nil || out.Execution != nil || f.executed != 0 {
		t.Fatalf("stale plan: err %v, result %+v, %d executions; want a StaleError and nothing executed", err, out, f.executed)
	}
	if !strings.Contains(err.Error(), "machine a: planned in place by ext, now rolling (extension gone)") {
		t.Errorf("the error does not say what changed: %v", err)
	}

	f.plan.Machines[0].Strategy, f.plan.Machines[0].Extensions = inplace.StrategyInPlace, []string{"ext"}
	out, err = s.Apply(t.Context(), ApplyRequest{Spec: one, Shown: shown})
	if err != nil || out.Execution == nil || f.executed != 1 || out.Revision != "r1" {
		t.Fatalf("fresh plan: err %v, result %+v, %d executions", err, out, f.executed)
	}
	res := out.Owner
	if res.Summary[SumInPlace] != 1 || res.Summary[SumChanging] != 1 || len(res.Waves) != 1 {
		t.Errorf("summary %v, waves %v: want one machine in place, one cluster changing in one wave", res.Summary, res.Waves)
	}
}

// Plan of the single-owner form is the owner's plan, with its blocked machines as Blocked (not
// an error), and no waves beyond the one of its cluster.
func TestPlanOneOwner(t *testing.T) {
	f := &ownerFake{plan: inplace.Plan{Machines: []inplace.MachinePlan{{Machine: "a", Strategy: inplace.StrategyBlocked, Notes: []string{"no extension"}}}}}
	s := &Service{OwnerPlanner: f, OwnerUpdater: f}
	res, err := s.Plan(t.Context(), Spec{Owner: &owners.Selection{Namespace: "fleet", Cluster: "c", ControlPlane: "cp"}}, nil)
	if err != nil || res.Owner == nil || res.Revision != "r1" || res.Owner.Request.Selection.ControlPlane != "cp" {
		t.Fatalf("plan: err %v, result %+v", err, res)
	}
	if res.Blocked == nil || res.Blocked.Error() != f.plan.Err().Error() {
		t.Errorf("blocked %v, want the owner plan's %v", res.Blocked, f.plan.Err())
	}
	if len(res.Plan.Waves) != 0 || f.executed != 0 {
		t.Errorf("plan made waves %v or executed %d times", res.Plan.Waves, f.executed)
	}
}
