package manifesttype

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestKeepPriorOnSameRevision(t *testing.T) {
	for _, tc := range []struct {
		name        string
		prior, plan types.String
		want        types.String
	}{
		{"formatting only keeps the prior text", types.StringValue(original), types.StringValue(reformatted), types.StringValue(original)},
		{"a real change is planned", types.StringValue(original), types.StringValue(changed), types.StringValue(changed)},
		{"create has no prior", types.StringNull(), types.StringValue(original), types.StringValue(original)},
		{"unknown stays unknown", types.StringValue(original), types.StringUnknown(), types.StringUnknown()},
		{"unparsable is planned as written", types.StringValue(original), types.StringValue("kind: ["), types.StringValue("kind: [")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &planmodifier.StringResponse{PlanValue: tc.plan}
			KeepPriorOnSameRevision().PlanModifyString(context.Background(), planmodifier.StringRequest{StateValue: tc.prior, PlanValue: tc.plan, ConfigValue: tc.plan}, resp)
			if !resp.PlanValue.Equal(tc.want) {
				t.Fatalf("planned %v, want %v", resp.PlanValue, tc.want)
			}
		})
	}
}

var objType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"manifests": tftypes.String, "revision": tftypes.String, "selector": tftypes.String,
}}

func obj(manifests, revision, selector any) tftypes.Value {
	return tftypes.NewValue(objType, map[string]tftypes.Value{
		"manifests": tftypes.NewValue(tftypes.String, manifests),
		"revision":  tftypes.NewValue(tftypes.String, revision),
		"selector":  tftypes.NewValue(tftypes.String, selector),
	})
}

func TestRestorePrior(t *testing.T) {
	unknown := tftypes.UnknownValue
	prior := obj(original, "abc", "env=prod")
	for _, tc := range []struct {
		name         string
		plan, config tftypes.Value
		restored     bool
	}{
		// The framework marked the computed revision unknown; the modifier kept the prior text.
		{"only framework marks differ", obj(original, unknown, "env=prod"), obj(reformatted, nil, "env=prod"), true},
		{"another attribute changed", obj(original, unknown, "env=dev"), obj(reformatted, nil, "env=dev"), false},
		{"the text changed", obj(changed, unknown, "env=prod"), obj(changed, nil, "env=prod"), false},
		// Unknown in the configuration (it depends on another resource): a real unknown.
		{"configured unknown", obj(original, "abc", unknown), obj(original, nil, unknown), false},
		{"nothing changed", prior, obj(original, nil, "env=prod"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RestorePrior(tc.plan, tc.config, prior)
			if ok != tc.restored {
				t.Fatalf("restored = %v, want %v", ok, tc.restored)
			}
			want := tc.plan
			if tc.restored {
				want = prior
			}
			if !got.Equal(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	if _, ok := RestorePrior(obj(original, unknown, "x"), obj(original, nil, "x"), tftypes.NewValue(objType, nil)); ok {
		t.Fatal("restored a create (no prior state)")
	}
}
