package apply

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectRef names one object on a cluster. It is what an inventory stores.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RefOf names obj.
func RefOf(obj *unstructured.Unstructured) ObjectRef {
	gvk := obj.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String is how errors and reports name the object: "Deployment demo/web", "Namespace demo".
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// GroupVersionKind of the object.
func (r ObjectRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// identity is what makes two refs the same object: the version is left out, so an object
// whose manifest moves to a newer API version is neither pruned nor counted twice.
type identity struct{ group, kind, namespace, name string }

func (r ObjectRef) identity() identity { return identity{r.Group, r.Kind, r.Namespace, r.Name} }

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
	return slices.CompactFunc(inv, func(a, b ObjectRef) bool { return a.identity() == b.identity() })
}

// Contains reports whether inv holds the object ref names, in any API version.
func (inv Inventory) Contains(ref ObjectRef) bool {
	id := ref.identity()
	return slices.ContainsFunc(inv, func(r ObjectRef) bool { return r.identity() == id })
}

// Diff returns the objects of prev that next no longer has (what a prune deletes), in prev's order.
func Diff(prev, next Inventory) Inventory {
	keep := make(map[identity]bool, len(next))
	for _, r := range next {
		keep[r.identity()] = true
	}
	var stale Inventory
	for _, r := range prev {
		if !keep[r.identity()] {
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
