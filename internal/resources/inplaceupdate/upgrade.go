package inplaceupdate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

var _ resource.ResourceWithUpgradeState = (*updateResource)(nil)

// UpgradeState upgrades states written before schema version 1, when the resource updated one
// owner of one cluster: `update_limit` was a number (ignored), `selector` a map of Machine labels
// (always refused, so null in any state), and the fleet attributes did not exist.
func (r *updateResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	return map[int64]resource.StateUpgrader{0: {StateUpgrader: upgradeFromV0}}
}

func upgradeFromV0(_ context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
	if req.RawState == nil || req.RawState.JSON == nil {
		resp.Diagnostics.AddError("Cannot Upgrade State", "The stored state of gradual_inplace_update (schema version 0) has no JSON form.")
		return
	}
	raw, err := upgradeV0JSON(req.RawState.JSON)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Upgrade State", fmt.Sprintf("The stored state of gradual_inplace_update (schema version 0) does not decode: %v.", err))
		return
	}
	resp.DynamicValue = &tfprotov6.DynamicValue{JSON: raw}
}

// upgradeV0JSON rewrites a version 0 state as version 1.
func upgradeV0JSON(in []byte) ([]byte, error) {
	var st map[string]any
	if err := json.Unmarshal(in, &st); err != nil {
		return nil, err
	}
	limit := "1"
	if n, ok := st["update_limit"].(float64); ok && n >= 1 {
		limit = fmt.Sprintf("%d", int64(n))
	}
	st["update_limit"] = limit
	st["selector"] = nil
	for _, k := range []string{"names", "machine_deployment_selector", "update_control_plane", "canary", "summary", "attention", "waves", "topology_variables"} {
		if _, ok := st[k]; !ok {
			st[k] = nil
		}
	}
	if _, ok := st["max_failures"]; !ok {
		st["max_failures"] = "0"
	}
	return json.Marshal(st)
}
