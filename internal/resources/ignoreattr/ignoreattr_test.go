package ignoreattr

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	rules := []Rule{{Kind: "Deployment", Paths: []string{".spec.replicas"}}, {Namespace: "a", Name: "b", Paths: []string{`.metadata.annotations["x/y"]`}}}
	v, diags := Value(ctx, rules)
	if diags.HasError() {
		t.Fatal(diags)
	}
	back, diags := Rules(ctx, v)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if string(Canonical(back)) != string(Canonical(rules)) {
		t.Errorf("round trip: %s, want %s", Canonical(back), Canonical(rules))
	}
	ig, err := Ignore(back)
	if err != nil || len(ig) != 2 || ig[1].Paths[0].String() != `.metadata.annotations["x/y"]` {
		t.Errorf("Ignore = %v, %v", ig, err)
	}
	if _, err := Ignore([]Rule{{Paths: []string{"spec"}}}); err == nil || !strings.Contains(err.Error(), "expected '.'") {
		t.Errorf("Ignore of a bad path: %v", err)
	}
	if Canonical(nil) != nil {
		t.Error("no rules must add nothing to the revision")
	}
	if !Known(v) || !Known(types.ListNull(types.ObjectType{AttrTypes: AttrTypes})) {
		t.Error("known values reported unknown")
	}
	unknownPath := types.ListValueMust(types.ObjectType{AttrTypes: AttrTypes}, []attr.Value{types.ObjectValueMust(AttrTypes, map[string]attr.Value{
		"kind": types.StringNull(), "namespace": types.StringNull(), "name": types.StringNull(),
		"paths": types.ListValueMust(types.StringType, []attr.Value{types.StringUnknown()}),
	})})
	if Known(unknownPath) || Known(types.ListUnknown(types.ObjectType{AttrTypes: AttrTypes})) {
		t.Error("unknown values reported known")
	}
}
