package fleetresource

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func windowValue(schedule, duration, zone string) types.Object {
	z := types.StringNull()
	if zone != "" {
		z = types.StringValue(zone)
	}
	return types.ObjectValueMust(MaintenanceWindowAttrTypes, map[string]attr.Value{
		"schedule": types.StringValue(schedule), "duration": types.StringValue(duration), "time_zone": z,
	})
}

// A resource without a window of its own takes the provider's; its own replaces it.
func TestHoldFromProviderWindow(t *testing.T) {
	ctx := context.Background()
	provider, diags := WindowFrom(ctx, windowValue("0 2 * * 6", "4h", "Europe/Berlin"))
	if diags.HasError() || provider == nil {
		t.Fatalf("provider window: %v", diags)
	}
	none := types.ObjectNull(MaintenanceWindowAttrTypes)
	hold, diags := HoldFrom(ctx, none, time.Minute, time.Minute, provider)
	if diags.HasError() || hold.Window != provider || hold.Margin != 2*time.Minute || hold.WindowName != "the provider's maintenance_window" {
		t.Errorf("without its own: %+v %v, want the provider's window", hold, diags)
	}
	hold, diags = HoldFrom(ctx, windowValue("@daily", "1h", ""), time.Minute, 0, provider)
	if diags.HasError() || hold.Window == nil || hold.Window == provider {
		t.Errorf("with its own: %+v %v, want its own window", hold, diags)
	}
	if hold, _ := HoldFrom(ctx, none, 0, 0, nil); hold.Window != nil {
		t.Errorf("neither: %+v, want no window", hold)
	}
	if w, diags := WindowFrom(ctx, none); w != nil || diags.HasError() {
		t.Errorf("no provider window: %v %v", w, diags)
	}
	if _, diags := WindowFrom(ctx, windowValue("not cron", "1h", "")); !diags.HasError() {
		t.Error("a bad schedule passed")
	}
}
