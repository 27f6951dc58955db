package inplaceupdate

import (
	"encoding/json"
	"testing"
)

// A version 0 state (one owner, update_limit a number) comes out as version 1: the limit as a
// string, the old Machine selector gone, the fleet attributes null, max_failures its default.
func TestUpgradeV0JSON(t *testing.T) {
	v0 := `{"id":"fleet/c1/c1-md-0","namespace":"fleet","cluster":"c1","machine_deployment":"c1-md-0","control_plane":null,` +
		`"selector":null,"version":"v1.34.1","update_limit":3,"fallback":"none","revision":"ip-0123456789","status":{"m1":"updated"}}`
	out, err := upgradeV0JSON([]byte(v0))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"update_limit": "3", "max_failures": "0", "selector": nil, "names": nil, "waves": nil,
		"machine_deployment": "c1-md-0", "revision": "ip-0123456789"}
	for k, v := range want {
		got, ok := st[k]
		if !ok || got != v {
			t.Errorf("%s = %#v (present %v), want %#v", k, got, ok, v)
		}
	}
	if _, err := upgradeV0JSON([]byte(`not json`)); err == nil {
		t.Error("garbage state upgraded without an error")
	}
}
