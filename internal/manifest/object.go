package manifest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectRef names one object on a cluster, with the API version it was applied in. Apply,
// prune, records and claims all name objects with it; two refs are the same object when their
// Identity is equal.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Identity is what makes two refs the same object: group, kind, namespace and name. The version
// is left out, so an object whose manifest moves to a newer API version is neither pruned, nor
// counted twice, nor claimed by two owners.
type Identity struct {
	Group, Kind, Namespace, Name string
}

// RefOf names obj.
func RefOf(obj *unstructured.Unstructured) ObjectRef {
	gvk := obj.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// IdentityOf is the identity of obj.
func IdentityOf(obj *unstructured.Unstructured) Identity { return RefOf(obj).Identity() }

// Identity of the object r names.
func (r ObjectRef) Identity() Identity {
	return Identity{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// String is how errors and reports name the object: "Deployment demo/web", "Namespace demo".
func (r ObjectRef) String() string { return r.Identity().String() }

// GroupVersionKind of the object.
func (r ObjectRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// String is how messages name the object: "Deployment demo/web", "Namespace demo".
func (id Identity) String() string {
	if id.Namespace == "" {
		return id.Kind + " " + id.Name
	}
	return id.Kind + " " + id.Namespace + "/" + id.Name
}

// key is the identity as a sortable string: "group/kind namespace/name". Revisions sort
// objects by it, so its form must never change (it would rename every revision).
func (id Identity) key() string {
	return fmt.Sprintf("%s/%s %s/%s", id.Group, id.Kind, id.Namespace, id.Name)
}
