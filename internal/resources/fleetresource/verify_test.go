package fleetresource

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
)

func TestVerifyDurations(t *testing.T) {
	for _, tc := range []struct {
		timeout, bake types.String
		want, wantBak time.Duration
	}{
		{types.StringNull(), types.StringNull(), 5 * time.Minute, 0},
		{types.StringUnknown(), types.StringValue(""), 5 * time.Minute, 0},
		{types.StringValue("90s"), types.StringValue("2m"), 90 * time.Second, 2 * time.Minute},
		// The validators refuse these; if one got through, the default holds, never zero.
		{types.StringValue("soon"), types.StringValue("later"), 5 * time.Minute, 0},
	} {
		got, bake := VerifyDurations(tc.timeout, tc.bake)
		if got != tc.want || bake != tc.wantBak {
			t.Errorf("VerifyDurations(%s, %s) = %s, %s; want %s, %s", tc.timeout, tc.bake, got, bake, tc.want, tc.wantBak)
		}
	}
}

func TestVerifyAttributeAndAs(t *testing.T) {
	extra := VerifyExtra{Name: "http_checks", Type: types.ListType{ElemType: types.StringType}, Default: types.ListValueMust(types.StringType, nil)}
	attrTypes := VerifyAttrTypes(extra)
	if len(attrTypes) != 3 || attrTypes["http_checks"] == nil || attrTypes["timeout"] != types.StringType {
		t.Fatalf("attribute types %v", attrTypes)
	}

	type model struct {
		Timeout  types.String `tfsdk:"timeout"`
		BakeTime types.String `tfsdk:"bake_time"`
		Checks   types.List   `tfsdk:"http_checks"`
	}
	defaults := model{Timeout: types.StringValue(DefaultVerifyTimeout), BakeTime: types.StringValue(DefaultBakeTime)}
	m := defaults
	if diags := VerifyAs(context.Background(), types.ObjectNull(attrTypes), &m); diags.HasError() || !m.Timeout.Equal(defaults.Timeout) || !m.BakeTime.Equal(defaults.BakeTime) {
		t.Errorf("a null verify changed the defaults: %+v %v", m, diags)
	}
	v := types.ObjectValueMust(attrTypes, map[string]attr.Value{
		"timeout": types.StringValue("1m"), "bake_time": types.StringValue("10s"), "http_checks": types.ListValueMust(types.StringType, nil),
	})
	if diags := VerifyAs(context.Background(), v, &m); diags.HasError() || m.Timeout.ValueString() != "1m" || m.BakeTime.ValueString() != "10s" {
		t.Errorf("VerifyAs = %+v %v", m, diags)
	}
}

func TestCELValidator(t *testing.T) {
	for expr, want := range map[string]string{
		"status.conditions.exists(e, e.type == 'Ready')": "",
		"status.conditions.exists(e, e.type == ":         "verify.health_checks[0].current: ERROR",
		"'not a bool'":                                   "not bool",
	} {
		req := validator.StringRequest{Path: path.Root("verify").AtName("health_checks").AtListIndex(0).AtName("current"), ConfigValue: types.StringValue(expr)}
		var resp validator.StringResponse
		CEL().ValidateString(context.Background(), req, &resp)
		switch {
		case want == "" && resp.Diagnostics.HasError():
			t.Errorf("%q refused: %v", expr, resp.Diagnostics)
		case want != "" && (!resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics[0].Detail(), want)):
			t.Errorf("%q: %v, want an error with %q", expr, resp.Diagnostics, want)
		}
	}
}

// The rules kept in the records come back as the attribute they were read from.
func TestHealthRulesRoundTrip(t *testing.T) {
	ctx := context.Background()
	rules := []health.Rule{
		{APIVersion: "apps/v1", Kind: "Deployment", Current: "true", Failed: "false"},
		{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.ready", InProgress: "has(status.step)"},
	}
	back, diags := HealthRules(ctx, HealthValue(rules))
	if diags.HasError() || !slices.Equal(back, rules) {
		t.Fatalf("HealthRules(HealthValue(rules)) = %+v, %v; want %+v", back, diags, rules)
	}
	if !HealthValue(nil).IsNull() {
		t.Error("no rules should be a null attribute")
	}
	dup := HealthValue([]health.Rule{rules[0], rules[0]})
	if _, diags := HealthChecker(ctx, dup); !diags.HasError() || !strings.Contains(diags[0].Detail(), "a second rule for apps/v1 Deployment") {
		t.Errorf("two rules for one kind: %v, want an error naming the kind", diags)
	}
}
