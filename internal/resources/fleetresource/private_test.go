package fleetresource

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// WritesTrue tells `adopt = true` written in the configuration from adopt left to its default
// (null in the configuration, true in the plan): only the first is the opt-in.
func TestWritesTrue(t *testing.T) {
	s := schema.Schema{Attributes: map[string]schema.Attribute{"adopt": schema.BoolAttribute{Optional: true}}}
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"adopt": tftypes.Bool}}
	for _, tc := range []struct {
		name  string
		value any
		want  bool
	}{
		{"written true", true, true},
		{"written false", false, false},
		{"left to its default", nil, false},
		{"unknown", tftypes.UnknownValue, false},
	} {
		config := tfsdk.Config{Schema: s, Raw: tftypes.NewValue(typ, map[string]tftypes.Value{"adopt": tftypes.NewValue(tftypes.Bool, tc.value)})}
		if got := WritesTrue(context.Background(), config, path.Root("adopt")); got != tc.want {
			t.Errorf("%s: WritesTrue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
