package apply

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// ObjectRef names one object on a cluster; it is what an inventory stores. It is
// internal/manifest's, the one definition of an object's identity (see manifest.Identity).
type ObjectRef = manifest.ObjectRef

// RefOf names obj.
func RefOf(obj *unstructured.Unstructured) ObjectRef { return manifest.RefOf(obj) }

func compareRefs(a, b ObjectRef) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
}

// Inventory lists the objects applied to a cluster, sorted; it is JSON-serializable so records
// can store it. The next apply prunes what its inventory no longer has.
type Inventory []ObjectRef

// InventoryOf lists objs, sorted and without duplicates.
func InventoryOf(objs []*unstructured.Unstructured) Inventory {
	inv := make(Inventory, 0, len(objs))
	for _, obj := range objs {
		inv = append(inv, RefOf(obj))
	}
	slices.SortFunc(inv, compareRefs)
	return slices.CompactFunc(inv, func(a, b ObjectRef) bool { return a.Identity() == b.Identity() })
}

// Contains reports whether inv holds the object ref names, in any API version.
func (inv Inventory) Contains(ref ObjectRef) bool {
	id := ref.Identity()
	return slices.ContainsFunc(inv, func(r ObjectRef) bool { return r.Identity() == id })
}

// Diff returns the objects of prev that next no longer has (what a prune deletes), in prev's order.
func Diff(prev, next Inventory) Inventory {
	keep := make(map[manifest.Identity]bool, len(next))
	for _, r := range next {
		keep[r.Identity()] = true
	}
	var stale Inventory
	for _, r := range prev {
		if !keep[r.Identity()] {
			stale = append(stale, r)
		}
	}
	return stale
}

func isCRD(group, kind string) bool {
	return group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition"
}

func isNamespace(group, kind string) bool { return group == "" && kind == "Namespace" }

// Stages splits objs in the order Apply applies them: first the definitions (CRDs and
// Namespaces), which must exist before the objects that use them can even be dry-run, then
// everything else. Each stage is in ssa's kind order (CRDs, Namespaces, ClusterRoles, ...,
// ConfigMaps, Services, Deployments, ..., webhooks last), ties broken by namespace and name.
// objs itself is left as it was.
func Stages(objs []*unstructured.Unstructured) (definitions, resources []*unstructured.Unstructured) {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if isCRD(gvk.Group, gvk.Kind) || isNamespace(gvk.Group, gvk.Kind) {
			definitions = append(definitions, obj)
		} else {
			resources = append(resources, obj)
		}
	}
	sort.Stable(ssa.SortableUnstructureds(definitions))
	sort.Stable(ssa.SortableUnstructureds(resources))
	return definitions, resources
}

// deleteOrder is the order Delete deletes refs in: dependents first (ssa's kind order
// reversed, so webhooks go first and ConfigMaps after the Deployments that mount them), then
// Namespaces, then CRDs, whose deletion would take every custom resource with it.
func deleteOrder(refs Inventory) Inventory {
	rank := func(r ObjectRef) int {
		switch {
		case isCRD(r.Group, r.Kind):
			return 2
		case isNamespace(r.Group, r.Kind):
			return 1
		}
		return 0
	}
	out := slices.Clone(refs)
	slices.SortStableFunc(out, func(a, b ObjectRef) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		ga, gb := schema.GroupKind{Group: a.Group, Kind: a.Kind}, schema.GroupKind{Group: b.Group, Kind: b.Kind}
		switch {
		case !ssa.Equals(ga, gb):
			if ssa.IsLessThan(gb, ga) {
				return -1
			}
			return 1
		case a.Namespace != b.Namespace:
			return cmp.Compare(a.Namespace, b.Namespace)
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// copies deep-copies objs: ssa sorts the slices it is given and edits objects (it strips
// invalid CA bundles from CRDs), and callers' objects must stay as they were.
func copies(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		out[i] = obj.DeepCopy()
	}
	return out
}

// ObjectError says which object an operation failed on.
type ObjectError struct {
	Object ObjectRef
	// Op is what failed: "dry-run", "apply", "delete", "read".
	Op  string
	Err error
}

func (e *ObjectError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Object, e.Op, e.Err) }
func (e *ObjectError) Unwrap() error { return e.Err }
