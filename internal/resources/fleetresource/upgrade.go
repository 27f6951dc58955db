// upgrade.go: the state upgrades rollouts and module assignments share.

package fleetresource

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// StateVersion is the schema version of gradual_rollout and gradual_module_assignment: 1 made
// `waves` text, 2 made each object of `objects` JSON (it was YAML).
const StateVersion = 2

// Upgraders are the state upgraders of the resource typeName, whose schema (StateVersion) is
// current: from version 0, `waves` (UpgradeWavesJSON) and `objects` (UpgradeObjectsJSON); from
// version 1, `objects`. nested says `objects` holds a map per module (module assignments).
// Upgrading plans no change: the upgraded values are what the provider computes now.
func Upgraders(typeName string, current schema.Schema, nested bool) map[int64]resource.StateUpgrader {
	attrs := map[string]bool{}
	for name := range current.Attributes {
		attrs[name] = true
	}
	for name := range current.Blocks {
		attrs[name] = true
	}
	step := func(version int64, convert func([]byte) ([]byte, error)) resource.StateUpgrader {
		return resource.StateUpgrader{StateUpgrader: func(_ context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
			if req.RawState == nil || req.RawState.JSON == nil {
				resp.Diagnostics.AddError("Cannot Upgrade State", fmt.Sprintf("The stored state of %s (schema version %d) has no JSON form.", typeName, version))
				return
			}
			raw, err := convert(req.RawState.JSON)
			if err != nil {
				resp.Diagnostics.AddError("Cannot Upgrade State", fmt.Sprintf("The stored state of %s (schema version %d) does not decode: %v.", typeName, version, err))
				return
			}
			resp.DynamicValue = &tfprotov6.DynamicValue{JSON: raw}
		}}
	}
	objects := func(in []byte) ([]byte, error) { return UpgradeObjectsJSON(in, attrs, nested) }
	return map[int64]resource.StateUpgrader{
		0: step(0, func(in []byte) ([]byte, error) {
			out, err := UpgradeWavesJSON(in, attrs)
			if err != nil {
				return nil, err
			}
			return objects(out)
		}),
		1: step(1, objects),
	}
}

// UpgradeObjectsJSON rewrites each object of `objects` in a stored state from before schema
// version 2, YAML, as JSON (manifest.DocumentFromYAML); nested says `objects` is a map per module.
// Attributes the current schema does not have (attrs) are dropped, as a plain refresh would drop
// them.
func UpgradeObjectsJSON(in []byte, attrs map[string]bool, nested bool) ([]byte, error) {
	st, err := currentAttributes(in, attrs)
	if err != nil {
		return nil, err
	}
	raw, ok := st["objects"]
	if !ok || string(raw) == "null" {
		return json.Marshal(st)
	}
	convert := func(docs map[string]*string) error {
		for key, doc := range docs {
			if doc == nil {
				continue
			}
			out, err := manifest.DocumentFromYAML(*doc)
			if err != nil {
				return fmt.Errorf("objects[%q]: %w", key, err)
			}
			*doc = out
		}
		return nil
	}
	if nested {
		var modules map[string]map[string]*string
		if err = json.Unmarshal(raw, &modules); err != nil {
			return nil, fmt.Errorf("objects: %w", err)
		}
		for _, docs := range modules {
			if err = convert(docs); err != nil {
				return nil, err
			}
		}
		st["objects"], err = json.Marshal(modules)
	} else {
		var docs map[string]*string
		if err = json.Unmarshal(raw, &docs); err != nil {
			return nil, fmt.Errorf("objects: %w", err)
		}
		if err = convert(docs); err != nil {
			return nil, err
		}
		st["objects"], err = json.Marshal(docs)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

// currentAttributes reads a stored state in, without the attributes the current schema does not
// have (attrs), as a plain refresh would drop them.
func currentAttributes(in []byte, attrs map[string]bool) (map[string]json.RawMessage, error) {
	var st map[string]json.RawMessage
	if err := json.Unmarshal(in, &st); err != nil {
		return nil, err
	}
	for k := range st {
		if !attrs[k] {
			delete(st, k)
		}
	}
	return st, nil
}
