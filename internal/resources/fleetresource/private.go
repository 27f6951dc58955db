package fleetresource

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// LoadPrivateJSON reads the private state keys into their targets (pointers), each stored as
// JSON; a missing or null key leaves its target as it is. what names the resource in the error
// ("rollout", "assignment").
func LoadPrivateJSON(ctx context.Context, from PrivateGetter, what string, into map[string]any) diag.Diagnostics {
	var diags diag.Diagnostics
	if from == nil {
		return diags
	}
	for key, target := range into {
		raw, d := from.GetKey(ctx, key)
		diags.Append(d...)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, target); err != nil {
			diags.AddError("Unreadable Private State", fmt.Sprintf("The %s's private state %q cannot be read (%v); the next refresh rewrites it.", what, key, err))
		}
	}
	return diags
}

// SavePrivateJSON writes each value under its key as JSON; a nil value (a nil map or slice
// included) removes its key.
func SavePrivateJSON(ctx context.Context, to PrivateSetter, values map[string]any) diag.Diagnostics {
	var diags diag.Diagnostics
	if to == nil {
		return diags
	}
	for key, value := range values {
		raw, err := json.Marshal(value)
		if err != nil {
			diags.AddError("Private State Not Saved", fmt.Sprintf("Private state %q cannot be encoded: %v.", key, err))
			continue
		}
		if string(raw) == "null" {
			raw = nil
		}
		diags.Append(to.SetKey(ctx, key, raw)...)
	}
	return diags
}

// WritesTrue reports whether config writes true for the bool attribute at p: set by the user,
// as opposed to left to its default (which a plan's value cannot tell apart). An explicit opt-in
// reads it, such as `adopt = true` taking over a records-missing cluster's objects.
func WritesTrue(ctx context.Context, config tfsdk.Config, p path.Path) bool {
	var v types.Bool
	if diags := config.GetAttribute(ctx, p, &v); diags.HasError() {
		return false
	}
	return !v.IsNull() && !v.IsUnknown() && v.ValueBool()
}
