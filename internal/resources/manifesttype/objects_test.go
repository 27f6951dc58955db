package manifesttype

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

// ObjectsOf fills `objects` of a state written before it existed: an empty bundle (everything in
// sensitive_manifests) is an empty map, as a plan makes it, so upgrading plans no change.
func TestObjectsOf(t *testing.T) {
	ctx := context.Background()
	if m := ObjectsOf(ctx, "", ""); m.IsNull() || len(m.Elements()) != 0 {
		t.Errorf("no manifests: %v, want an empty map", m)
	}
	m := ObjectsOf(ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n", "apps")
	want := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a","namespace":"apps"}}`
	if got, ok := m.Elements()["/ConfigMap apps/a"].(types.String); !ok || got.ValueString() != want {
		t.Errorf("objects = %v, want /ConfigMap apps/a = %q", m, want)
	}
	if m := ObjectsOf(ctx, "kind: [", ""); !m.IsNull() {
		t.Errorf("unparsable manifests: %v, want null (a refresh does not fail on it)", m)
	}
}
