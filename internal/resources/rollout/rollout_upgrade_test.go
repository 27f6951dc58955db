package rollout

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// upgraded runs the upgrader from version on a stored state with every current attribute null
// but those of set, and returns the upgraded state's attributes, which must be a value of the
// current schema.
func upgraded(t *testing.T, version int64, set map[string]any) map[string]tftypes.Value {
	t.Helper()
	ctx := context.Background()
	r := New().(*rolloutResource)
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	stored := map[string]any{}
	for name := range sr.Schema.Attributes {
		stored[name] = nil
	}
	for name, v := range set {
		stored[name] = v
	}
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	upgrader, ok := r.UpgradeState(ctx)[version]
	if !ok {
		t.Fatalf("no upgrader from version %d", version)
	}
	var resp resource.UpgradeStateResponse
	upgrader.StateUpgrader(ctx, resource.UpgradeStateRequest{RawState: &tfprotov6.RawState{JSON: raw}}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("upgrade: %v", resp.Diagnostics)
	}
	val, err := resp.DynamicValue.Unmarshal(sr.Schema.Type().TerraformType(ctx))
	if err != nil {
		t.Fatalf("the upgraded state is not a value of the current schema: %v", err)
	}
	var attrs map[string]tftypes.Value
	if err := val.As(&attrs); err != nil {
		t.Fatal(err)
	}
	return attrs
}

// A schema version 0 state (waves a list of counts, plus an attribute 0.1.0 had) comes out of the
// upgrader as a value of the current schema, waves as text.
func TestUpgradeStateFromV0(t *testing.T) {
	attrs := upgraded(t, 0, map[string]any{"id": "fleet/web", "waves": []int{1, 2, 2}, "cluster_states": map[string]any{"c1": map[string]any{"revision": "r1"}}})
	var waves string
	if err := attrs["waves"].As(&waves); err != nil || waves != "3 waves: 1 wave of 1 cluster, then 2 waves of 2 clusters" {
		t.Errorf("waves %q (%v)", waves, err)
	}
}

// A schema version 1 state, each object of `objects` YAML, comes out with each object as the
// provider writes it now (JSON), so that the first plan after upgrading shows no change; the
// objects' keys stay.
func TestUpgradeStateFromV1ObjectsYAML(t *testing.T) {
	attrs := upgraded(t, 1, map[string]any{"id": "fleet/web", "waves": "none", "objects": map[string]any{
		"/ConfigMap web/settings": "apiVersion: v1\ndata:\n  replicas: \"3\"\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: web\n",
	}})
	var objects map[string]tftypes.Value
	if err := attrs["objects"].As(&objects); err != nil {
		t.Fatal(err)
	}
	var doc string
	want := `{"apiVersion":"v1","data":{"replicas":"3"},"kind":"ConfigMap","metadata":{"name":"settings","namespace":"web"}}`
	if err := objects["/ConfigMap web/settings"].As(&doc); err != nil || doc != want {
		t.Errorf("objects[/ConfigMap web/settings] = %q (%v), want %q", doc, err, want)
	}
}
