package inplaceupdate

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

// The plan Terraform showed against the one made at apply: a machine shown in place that is now
// blocked or given to other extensions makes the plan stale; anything else does not.
func TestStaleMachines(t *testing.T) {
	version := []inplace.Field{{Object: inplace.KindMachine, Path: "/spec/version"}}
	shown, diags := machinesValue(inplace.Plan{Machines: []inplace.MachinePlan{
		{Machine: "a", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}, Changed: version},
		{Machine: "b", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}, Changed: version},
		{Machine: "c", Strategy: inplace.StrategyUnchanged},
	}})
	if diags.HasError() {
		t.Fatal(diags)
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
	if got := staleMachines(types.ListUnknown(shown.ElementType(t.Context())), now); got != nil {
		t.Errorf("unknown plan compared: %v", got)
	}
}
