package updateext

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// coveringPatch is the JSON patch (RFC 6902) that gives current the desired value at each of
// paths where they differ; nil when there is nothing to cover. Both objects are anything that
// marshals to a JSON object (a typed Machine, a RawExtension).
func coveringPatch(current, desired any, paths []string) ([]byte, error) {
	cur, err := asMap(current)
	if err != nil {
		return nil, fmt.Errorf("current object: %w", err)
	}
	des, err := asMap(desired)
	if err != nil {
		return nil, fmt.Errorf("desired object: %w", err)
	}
	var ops []patchOp
	for _, p := range paths {
		cv, cok := lookup(cur, p)
		dv, dok := lookup(des, p)
		switch {
		case cok == dok && reflect.DeepEqual(cv, dv):
		case !dok:
			ops = append(ops, patchOp{Op: "remove", Path: p})
		default:
			// Parents first, so "add" has somewhere to go.
			ops = append(ops, parents(cur, p)...)
			ops = append(ops, patchOp{Op: "add", Path: p, Value: dv})
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// parents are the "add {}" operations that create the missing objects above path in obj.
func parents(obj map[string]any, path string) []patchOp {
	var out []patchOp
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	cur := obj
	for i, seg := range segs[:len(segs)-1] {
		next, ok := cur[unescape(seg)].(map[string]any)
		if !ok {
			for j := i; j < len(segs)-1; j++ {
				out = append(out, patchOp{Op: "add", Path: "/" + strings.Join(segs[:j+1], "/"), Value: map[string]any{}})
			}
			return out
		}
		cur = next
	}
	return out
}

func asMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if string(raw) == "null" || string(raw) == "{}" {
		return map[string]any{}, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// lookup follows a JSON pointer through nested objects.
func lookup(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[unescape(seg)]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func unescape(seg string) string {
	return strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
}
