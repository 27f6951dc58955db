package rollout

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// A schema version 0 state (waves a list of counts, plus an attribute 0.1.0 had) comes out of the
// upgrader as a value of the current schema, waves as text.
func TestUpgradeStateFromV0(t *testing.T) {
	ctx := context.Background()
	r := &rolloutResource{}
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	v0 := map[string]any{}
	for name := range sr.Schema.Attributes {
		v0[name] = nil
	}
	v0["id"], v0["waves"], v0["cluster_states"] = "fleet/web", []int{1, 2, 2}, map[string]any{"c1": map[string]any{"revision": "r1"}}
	raw, err := json.Marshal(v0)
	if err != nil {
		t.Fatal(err)
	}
	var resp resource.UpgradeStateResponse
	r.UpgradeState(ctx)[0].StateUpgrader(ctx, resource.UpgradeStateRequest{RawState: &tfprotov6.RawState{JSON: raw}}, &resp)
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
	var waves string
	if err := attrs["waves"].As(&waves); err != nil || waves != "3 waves: 1 wave of 1 cluster, then 2 waves of 2 clusters" {
		t.Errorf("waves %q (%v)", waves, err)
	}
}
