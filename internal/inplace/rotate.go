package inplace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// rotatedSuffix is what RotatedName appends: "-gip-" and eight hex digits of the content hash.
// A name that already ends so is rotated from its base, so names do not grow with every change.
var rotatedSuffix = regexp.MustCompile(`-gip-[0-9a-f]{8}$`)

// maxNameLength is the longest object name (a DNS subdomain).
const maxNameLength = 253

// RotatedName is the name of a template with content spec, derived from the name of the
// template it replaces: the same content always gets the same name (so a repeated apply finds
// the template it created), another content another name.
func RotatedName(from string, spec any) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	base := rotatedSuffix.ReplaceAllString(from, "")
	suffix := "-gip-" + hex.EncodeToString(sum[:])[:8]
	if len(base)+len(suffix) > maxNameLength {
		base = base[:maxNameLength-len(suffix)]
	}
	return base + suffix, nil
}

// RotateTemplate is the template that replaces tmpl once patch (a JSON merge patch of the
// template's spec.template.spec) is applied: a new object under a content-hashed name, with
// tmpl's labels, annotations and owners and none of its server-set metadata. Cluster API never
// sees a template change under its feet (its MachineSets keep the one they were made from);
// the owner is pointed at the new one instead. changed is false, and nothing is returned,
// when the patch changes nothing.
func RotateTemplate(tmpl *unstructured.Unstructured, patch []byte) (rotated *unstructured.Unstructured, changed bool, err error) {
	if len(patch) == 0 {
		return nil, false, nil
	}
	spec, _, err := unstructured.NestedFieldNoCopy(tmpl.Object, "spec", "template", "spec")
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: spec.template.spec: %w", tmpl.GetKind(), tmpl.GetName(), err)
	}
	merged, err := mergeInto(spec, patch)
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: apply the spec patch: %w", tmpl.GetKind(), tmpl.GetName(), err)
	}
	cur, err := normalise(orEmpty(spec))
	if err != nil {
		return nil, false, err
	}
	if len(diff("", "", cur, merged)) == 0 {
		return nil, false, nil
	}
	out := kindAndLabels(tmpl)
	out.SetOwnerReferences(tmpl.GetOwnerReferences())
	newSpec, _ := runtime.DeepCopyJSONValue(tmpl.Object["spec"]).(map[string]any)
	if newSpec == nil {
		newSpec = map[string]any{}
	}
	out.Object["spec"] = newSpec
	if err := unstructured.SetNestedField(out.Object, merged, "spec", "template", "spec"); err != nil {
		return nil, false, err
	}
	name, err := RotatedName(tmpl.GetName(), out.Object["spec"])
	if err != nil {
		return nil, false, err
	}
	out.SetName(name)
	return out, true, nil
}

// MergeSpec is spec with patch (a JSON merge patch) applied, as a JSON object; spec is not
// modified.
func MergeSpec(spec any, patch []byte) (map[string]any, error) {
	return mergeInto(spec, patch)
}

func mergeInto(spec any, patch []byte) (map[string]any, error) {
	doc, err := json.Marshal(orEmpty(spec))
	if err != nil {
		return nil, err
	}
	merged := doc
	if len(patch) > 0 {
		if merged, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return nil, err
		}
	}
	var m map[string]any
	if err := json.Unmarshal(merged, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}
