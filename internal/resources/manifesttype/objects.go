package manifesttype

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// The `objects` attributes show a bundle object by object. Terraform prints a changed multi-line
// string whole — every line of a 300-line bundle for a one-line edit — but hides a map's
// unchanged elements, and renders a string holding JSON field by field (jsonencode(...), the
// unchanged fields hidden). So `manifests` is marked sensitive (kept out of the CLI's output, not
// out of the state or the plan) and the plan shows, under `objects`, the changed fields of the
// changed objects only.

// ObjectsType is the element type of an `objects` map: an object's key → its JSON.
var ObjectsType = types.StringType

// ObjectsDescription documents an `objects` attribute; of names the attribute it shows.
func ObjectsDescription(of string) string {
	return "The objects of " + of + ", one entry per object: the key is `group/Kind namespace/name` (empty group for " +
		"the core API), the value the object as it is applied (compact JSON, keys sorted, default namespace filled in; " +
		"`jsondecode()` reads it). Known at plan time. A plan shows only the entries that change, and within each only " +
		"the fields that change (the CLI renders JSON as `jsonencode(...)` and hides unchanged fields), where a change to " +
		of + " — marked sensitive so that the CLI does not print the whole text for a one-line edit — would show every line."
}

// Objects is the `objects` value of objs.
func Objects(ctx context.Context, at path.Path, objs []*unstructured.Unstructured) (types.Map, diag.Diagnostics) {
	var diags diag.Diagnostics
	docs, err := manifest.Documents(objs)
	if err != nil {
		diags.AddAttributeError(at, "Invalid Manifests", err.Error())
		return types.MapUnknown(ObjectsType), diags
	}
	return types.MapValueFrom(ctx, ObjectsType, docs)
}

// ObjectsOf is the `objects` value of a `manifests` text alone, with the default namespace: for
// a state written before `objects` existed, or imported. (A plan works from the whole bundle,
// both halves, which can only differ here when a custom kind's scope is defined by a CRD in the
// sensitive half.) A text that no longer parses gives a null map rather than a failed refresh.
func ObjectsOf(ctx context.Context, manifests, defaultNamespace string) types.Map {
	set, err := manifest.Parse(manifests)
	if err == nil {
		err = set.DefaultNamespace(defaultNamespace)
	}
	if err != nil {
		return types.MapNull(ObjectsType)
	}
	m, diags := Objects(ctx, path.Empty(), set.Objects)
	if diags.HasError() {
		return types.MapNull(ObjectsType)
	}
	return m
}
