package manifesttype

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

const original = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: demo
data:
  a: "1"
  b: "2"
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
`

// The same objects: other key order, indentation, a comment, quoting, an empty document, the
// documents in another order.
const reformatted = `# the namespace first this time
---
kind: Namespace
apiVersion: v1
metadata: {name: demo}
---
---
kind: ConfigMap
apiVersion: v1
metadata:
    namespace: demo
    name: app
data: {b: '2', a: "1"}
`

const changed = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: demo
data:
  a: "1"
  b: "3"
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
`

func TestSemanticEquals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		prior, new string
		want       bool
	}{
		{"identical", original, original, true},
		{"formatting only", original, reformatted, true},
		{"a value changed", original, changed, false},
		{"new text does not parse", original, "kind: [", false},
		{"prior text does not parse", "kind: [", original, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, diags := NewValue(tc.prior).StringSemanticEquals(ctx, NewValue(tc.new))
			if diags.HasError() {
				t.Fatalf("diagnostics: %v", diags)
			}
			if got != tc.want {
				t.Fatalf("StringSemanticEquals = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSemanticEqualsRejectsOtherTypes(t *testing.T) {
	_, diags := NewValue(original).StringSemanticEquals(context.Background(), basetypes.NewStringValue(original))
	if !diags.HasError() {
		t.Fatal("a plain string was compared without an error")
	}
}

// Equal stays exact: the framework uses it to tell whether a value changed at all, and only
// semantic equality may look through formatting.
func TestEqualIsExact(t *testing.T) {
	if NewValue(original).Equal(NewValue(reformatted)) {
		t.Fatal("Equal looked through formatting")
	}
	if !NewValue(original).Equal(NewValue(original)) {
		t.Fatal("Equal of identical texts is false")
	}
	if NewValue(original).Equal(basetypes.NewStringValue(original)) {
		t.Fatal("Equal of a plain string is true")
	}
}

func TestTypeRoundTrip(t *testing.T) {
	ctx := context.Background()
	v, err := Type{}.ValueFromTerraform(ctx, tftypes.NewValue(tftypes.String, original))
	if err != nil {
		t.Fatal(err)
	}
	mv, ok := v.(Value)
	if !ok || mv.ValueString() != original {
		t.Fatalf("ValueFromTerraform = %#v", v)
	}
	if !mv.Type(ctx).Equal(Type{}) || (Type{}).Equal(basetypes.StringType{}) {
		t.Fatal("type identity is wrong")
	}
	null, err := Type{}.ValueFromTerraform(ctx, tftypes.NewValue(tftypes.String, nil))
	if err != nil || !null.IsNull() {
		t.Fatalf("null round trip: %v %v", null, err)
	}
}
