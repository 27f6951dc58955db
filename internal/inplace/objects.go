package inplace

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Kind names one of the three objects that make a machine.
type Kind string

const (
	KindMachine               Kind = "machine"
	KindInfrastructureMachine Kind = "infrastructureMachine"
	KindBootstrapConfig       Kind = "bootstrapConfig"
)

// kinds is the order objects are looked at and fields are listed in.
var kinds = []Kind{KindMachine, KindInfrastructureMachine, KindBootstrapConfig}

// Objects are a machine's Machine, infrastructure machine and bootstrap config. The bootstrap
// config may be nil (machines bootstrapped from a data secret have none).
type Objects struct {
	Machine               *unstructured.Unstructured
	InfrastructureMachine *unstructured.Unstructured
	BootstrapConfig       *unstructured.Unstructured
}

func (o Objects) get(k Kind) *unstructured.Unstructured {
	switch k {
	case KindMachine:
		return o.Machine
	case KindInfrastructureMachine:
		return o.InfrastructureMachine
	default:
		return o.BootstrapConfig
	}
}

func (o *Objects) set(k Kind, u *unstructured.Unstructured) {
	switch k {
	case KindMachine:
		o.Machine = u
	case KindInfrastructureMachine:
		o.InfrastructureMachine = u
	default:
		o.BootstrapConfig = u
	}
}

// Change is what the user wants of every machine.
type Change struct {
	// Version is the Kubernetes version for Machine spec.version; "" leaves it.
	Version string
	// MachineSpec, InfrastructureMachineSpec and BootstrapConfigSpec are JSON merge patches
	// (RFC 7386) applied to each object's spec; empty leaves it. A patch's null removes a field.
	MachineSpec, InfrastructureMachineSpec, BootstrapConfigSpec []byte
	// TopologyVariables are values, JSON each, for named variables of a managed topology
	// (Cluster spec.topology.variables, by name); only a Cluster built from a ClusterClass takes
	// them. Empty leaves every variable as it is.
	TopologyVariables map[string]json.RawMessage
}

func (c Change) patch(k Kind) []byte {
	switch k {
	case KindMachine:
		return c.MachineSpec
	case KindInfrastructureMachine:
		return c.InfrastructureMachineSpec
	default:
		return c.BootstrapConfigSpec
	}
}

// Validate checks that each patch is a JSON object: errors a plan should report before it
// reads or calls anything.
func (c Change) Validate() error {
	for _, k := range kinds {
		p := c.patch(k)
		if len(p) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil || m == nil {
			return fmt.Errorf("the %s spec patch is not a JSON object (a JSON merge patch of spec): %s", k, firstLine(p))
		}
	}
	return nil
}

// ValidateVariables checks that each topology variable has a name and a JSON value: errors a
// plan should report before it reads or calls anything.
func (c Change) ValidateVariables() error {
	names := slices.Sorted(maps.Keys(c.TopologyVariables))
	for _, n := range names {
		v := c.TopologyVariables[n]
		switch {
		case n == "":
			return fmt.Errorf("a topology variable has no name")
		case !json.Valid(v):
			return fmt.Errorf("the value of topology variable %q is not JSON (jsonencode it): %s", n, firstLine(v))
		}
	}
	return nil
}

// Desired is current with change applied: spec.version set and each spec merge-patched.
// current is not modified. A change to an object the machine lacks (a bootstrap patch for a
// machine without a bootstrap config) is an error.
func Desired(current Objects, change Change) (Objects, error) {
	if err := change.Validate(); err != nil {
		return Objects{}, err
	}
	var out Objects
	for _, k := range kinds {
		cur := current.get(k)
		p := change.patch(k)
		if cur == nil {
			if len(p) > 0 || (k == KindMachine && change.Version != "") {
				return Objects{}, fmt.Errorf("the change patches the %s, but the machine has none", k)
			}
			continue
		}
		des := cur.DeepCopy()
		if len(p) > 0 {
			spec, _, err := unstructured.NestedFieldNoCopy(des.Object, "spec")
			if err != nil {
				return Objects{}, fmt.Errorf("%s %s: spec: %w", k, cur.GetName(), err)
			}
			doc, err := json.Marshal(orEmpty(spec))
			if err != nil {
				return Objects{}, err
			}
			merged, err := jsonpatch.MergePatch(doc, p)
			if err != nil {
				return Objects{}, fmt.Errorf("%s %s: apply the spec patch: %w", k, cur.GetName(), err)
			}
			var m map[string]any
			if err := json.Unmarshal(merged, &m); err != nil {
				return Objects{}, err
			}
			des.Object["spec"] = m
		}
		if k == KindMachine && change.Version != "" {
			if err := unstructured.SetNestedField(des.Object, change.Version, "spec", "version"); err != nil {
				return Objects{}, fmt.Errorf("machine %s: %w", cur.GetName(), err)
			}
		}
		out.set(k, des)
	}
	return out, nil
}

func orEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

// Field is one changed spec field: a JSON pointer into one of the objects. Objects are
// compared key by key; lists and scalars as a whole.
type Field struct {
	Object Kind
	// Path is a JSON pointer (RFC 6901) from the object's root, e.g. /spec/version.
	Path string
}

// String reads like "machine spec.version".
func (f Field) String() string {
	segs := strings.Split(strings.TrimPrefix(f.Path, "/"), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return string(f.Object) + " " + strings.Join(segs, ".")
}

// ChangedFields lists the spec fields that differ between current and desired, in object
// order then path order.
func ChangedFields(current, desired Objects) ([]Field, error) {
	var out []Field
	for _, k := range kinds {
		cur, err := specOf(current.get(k))
		if err != nil {
			return nil, fmt.Errorf("current %s: %w", k, err)
		}
		des, err := specOf(desired.get(k))
		if err != nil {
			return nil, fmt.Errorf("desired %s: %w", k, err)
		}
		out = append(out, diff(k, "/spec", cur, des)...)
	}
	return out, nil
}

// specOf is an object's spec, normalised through JSON so that values compare alike whether
// they came from the API server (int64) or a patch (float64).
func specOf(u *unstructured.Unstructured) (any, error) {
	if u == nil {
		return nil, nil
	}
	return normalise(u.Object["spec"])
}

func normalise(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(raw, &out)
}

// diff walks two values: objects key by key (an absent object reads as empty), anything else
// compared whole.
func diff(k Kind, path string, a, b any) []Field {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if (aIsMap || a == nil) && (bIsMap || b == nil) && (aIsMap || bIsMap) {
		keys := make([]string, 0, len(am)+len(bm))
		for key := range am {
			keys = append(keys, key)
		}
		for key := range bm {
			if _, ok := am[key]; !ok {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		var out []Field
		for _, key := range keys {
			out = append(out, diff(k, path+"/"+escape(key), am[key], bm[key])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []Field{{Object: k, Path: path}}
}

func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func firstLine(b []byte) string {
	s := string(b)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + "…"
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
