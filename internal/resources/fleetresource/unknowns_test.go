package fleetresource

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

type unknownsModel struct {
	Kept     types.String `tfsdk:"kept"`
	Filled   types.String `tfsdk:"filled"`
	Counts   types.Map    `tfsdk:"counts"`
	StillNot types.String `tfsdk:"still_not"`
	private  string
}

// TestFillUnknown: what the plan showed stays (a promise), what it left unknown is filled from
// what apply observed, and private fields are not touched.
func TestFillUnknown(t *testing.T) {
	dst := unknownsModel{Kept: types.StringValue("planned"), Filled: types.StringUnknown(), Counts: types.MapUnknown(types.Int64Type),
		StillNot: types.StringUnknown(), private: "mine"}
	observed := unknownsModel{Kept: types.StringValue("observed"), Filled: types.StringValue("observed"),
		Counts: types.MapNull(types.Int64Type), StillNot: types.StringUnknown(), private: "theirs"}
	FillUnknown(&dst, &observed)
	if dst.Kept.ValueString() != "planned" {
		t.Errorf("kept = %s: a planned value must stay", dst.Kept)
	}
	if dst.Filled.ValueString() != "observed" || !dst.Counts.IsNull() {
		t.Errorf("filled = %s, counts = %s: unknowns must take the observed values", dst.Filled, dst.Counts)
	}
	if !dst.StillNot.IsUnknown() || dst.private != "mine" {
		t.Errorf("still_not = %s, private = %s", dst.StillNot, dst.private)
	}
}
