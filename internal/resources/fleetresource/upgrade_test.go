package fleetresource

import (
	"encoding/json"
	"testing"
)

// A module assignment's `objects` is a map per module: each object in each module is upgraded,
// nulls stay null, and attributes the schema no longer has are dropped.
func TestUpgradeObjectsJSONNested(t *testing.T) {
	in := `{"objects":{"base":{"/Namespace /a":"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n","/ConfigMap a/x":null}},"gone":1,"waves":"none"}`
	out, err := UpgradeObjectsJSON([]byte(in), map[string]bool{"objects": true, "waves": true}, true)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Objects map[string]map[string]*string `json:"objects"`
		Gone    *int                          `json:"gone"`
		Waves   string                        `json:"waves"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Objects["base"]["/Namespace /a"]; got == nil || *got != `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}` {
		t.Errorf("upgraded object %v", got)
	}
	if st.Objects["base"]["/ConfigMap a/x"] != nil || st.Gone != nil || st.Waves != "none" {
		t.Errorf("state %s", out)
	}
	if _, err := UpgradeObjectsJSON([]byte(`{"objects":{"k":"kind: ["}}`), map[string]bool{"objects": true}, false); err == nil {
		t.Error("an unreadable object upgraded")
	}
	if out, err := UpgradeObjectsJSON([]byte(`{"objects":null}`), map[string]bool{"objects": true}, false); err != nil || string(out) != `{"objects":null}` {
		t.Errorf("null objects: %s %v", out, err)
	}
}
