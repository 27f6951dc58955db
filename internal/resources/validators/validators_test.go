package validators

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func check(v validator.String, value string) string {
	resp := &validator.StringResponse{}
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(value)}, resp)
	if !resp.Diagnostics.HasError() {
		return ""
	}
	return resp.Diagnostics[0].Summary() + ": " + resp.Diagnostics[0].Detail()
}

func TestValidators(t *testing.T) {
	cases := []struct {
		name  string
		v     validator.String
		value string
		want  string // "" = valid; else a substring of the error
	}{
		{"limit int", UpdateLimit(), "2", ""},
		{"limit percent", UpdateLimit(), "25%", ""},
		{"limit zero", UpdateLimit(), "0", "Invalid Update Limit"},
		{"limit 150%", UpdateLimit(), "150%", "1% to 100%"},
		{"limit abc", UpdateLimit(), "abc", "Invalid Update Limit"},
		{"budget zero", MaxFailures(), "0", ""},
		{"budget negative", MaxFailures(), "-1", "Invalid Failure Budget"},
		{"duration ok", Duration(time.Second, 0), "5m", ""},
		{"duration bad", Duration(time.Second, 0), "5 minutes", "not a duration"},
		{"duration short", Duration(time.Second, 0), "10ms", "shorter than 1s"},
		{"duration long", Duration(0, time.Hour), "2h", "longer than 1h0m0s"},
		{"manifests ok", Manifests(), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", ""},
		{"manifests bad yaml", Manifests(), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [\n", "document 2"},
		{"manifests empty", Manifests(), "# nothing\n", "no objects"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := check(tc.v, tc.value)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("%q: got %q, want %q", tc.value, got, tc.want)
			}
		})
	}
	// Unknown and null values are left to later phases.
	resp := &validator.StringResponse{}
	UpdateLimit().ValidateString(context.Background(), validator.StringRequest{ConfigValue: types.StringUnknown()}, resp)
	if resp.Diagnostics.HasError() {
		t.Fatal("unknown value rejected")
	}
}
