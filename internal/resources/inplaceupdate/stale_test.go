package inplaceupdate

import (
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
)

// What the plan Terraform showed says of each machine reaches the single-owner Apply's staleness check as it
// was shown; an unknown list (inputs unknown at plan) compares with nothing.
func TestShownMachines(t *testing.T) {
	version := []inplace.Field{{Object: inplace.KindMachine, Path: "/spec/version"}}
	shown, diags := machinesValue(inplace.Plan{Machines: []inplace.MachinePlan{
		{Machine: "a", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext", "ext2"}, Changed: version},
		{Machine: "c", Strategy: inplace.StrategyUnchanged},
	}})
	if diags.HasError() {
		t.Fatal(diags)
	}
	got := shownMachines(shown)
	if len(got) != 2 || got["a"].Strategy != inplace.StrategyInPlace || !slices.Equal(got["a"].Extensions, []string{"ext", "ext2"}) ||
		got["c"].Strategy != inplace.StrategyUnchanged {
		t.Errorf("shown: %+v", got)
	}
	var none map[string]fleetupdate.Shown
	if got := shownMachines(types.ListUnknown(shown.ElementType(t.Context()))); got != nil {
		t.Errorf("unknown list: %v, want %v", got, none)
	}
}
