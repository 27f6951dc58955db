package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KindUse is a kind the cluster does not serve, and the objects that use it.
type KindUse struct {
	APIVersion string
	Kind       string
	Objects    []ObjectRef
}

// NamespaceUse is a namespace objects cannot be applied in, and why.
type NamespaceUse struct {
	Namespace string
	// Reason: "does not exist" (and the bundle does not create it) or "is being deleted".
	Reason  string
	Objects []ObjectRef
}

// CheckError lists why a bundle cannot be applied to a cluster.
type CheckError struct {
	// MissingKinds: neither served by the cluster nor defined by a CRD of the bundle.
	MissingKinds []KindUse
	// Namespaces that are missing or being deleted.
	Namespaces []NamespaceUse
	// Unnamespaced objects are of a namespaced kind but have no metadata.namespace.
	Unnamespaced []ObjectRef
}

func (e *CheckError) Error() string {
	var parts []string
	for _, k := range e.MissingKinds {
		parts = append(parts, fmt.Sprintf("kind %s (apiVersion %s) is not served by the cluster and no CRD in the manifests defines it; used by %s",
			k.Kind, k.APIVersion, refList(k.Objects)))
	}
	for _, n := range e.Namespaces {
		parts = append(parts, fmt.Sprintf("namespace %s %s; used by %s", n.Namespace, n.Reason, refList(n.Objects)))
	}
	if len(e.Unnamespaced) > 0 {
		parts = append(parts, fmt.Sprintf("%s: namespaced kind without metadata.namespace", refList(e.Unnamespaced)))
	}
	return "cannot apply to this cluster: " + strings.Join(parts, "; ")
}

func refList(refs []ObjectRef) string {
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}

// Check verifies, before anything is applied, that objs can be applied to the cluster: every
// kind is served (counting those that the bundle's own CRDs define), namespaced objects name a
// namespace, and every namespace they use exists or is in the bundle, and is not being
// deleted. It returns a *CheckError listing every problem, or another error when the cluster
// cannot be asked. It only reads (API discovery and namespaces).
func (a *Applier) Check(ctx context.Context, objs []*unstructured.Unstructured) error {
	defined := definedKinds(objs)
	bundleNamespaces := map[string]bool{}
	for _, obj := range objs {
		if gvk := obj.GroupVersionKind(); isNamespace(gvk.Group, gvk.Kind) {
			bundleNamespaces[obj.GetName()] = true
		}
	}

	e := &CheckError{}
	missing := map[schema.GroupVersionKind]int{} // index in e.MissingKinds
	users := map[string][]ObjectRef{}            // namespace -> objects in it
	for _, obj := range objs {
		gvk, ref := obj.GroupVersionKind(), RefOf(obj)
		namespaced, ok := defined[gvk]
		if !ok {
			mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				i, seen := missing[gvk]
				if !seen {
					i = len(e.MissingKinds)
					missing[gvk] = i
					e.MissingKinds = append(e.MissingKinds, KindUse{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind})
				}
				e.MissingKinds[i].Objects = append(e.MissingKinds[i].Objects, ref)
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: look up kind %s: %w", ref, gvk.Kind, err)
			}
			namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		}
		if !namespaced {
			continue
		}
		if obj.GetNamespace() == "" {
			e.Unnamespaced = append(e.Unnamespaced, ref)
			continue
		}
		users[obj.GetNamespace()] = append(users[obj.GetNamespace()], ref)
	}

	check := map[string]bool{}
	for ns := range users {
		check[ns] = true
	}
	for ns := range bundleNamespaces {
		check[ns] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(check)) {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
		err := a.client.Get(ctx, client.ObjectKey{Name: ns}, live)
		switch {
		case apierrors.IsNotFound(err):
			if !bundleNamespaces[ns] {
				e.Namespaces = append(e.Namespaces, NamespaceUse{Namespace: ns, Reason: "does not exist", Objects: users[ns]})
			}
		case err != nil:
			return fmt.Errorf("read namespace %s: %w", ns, err)
		case live.GetDeletionTimestamp() != nil:
			objects := users[ns]
			if bundleNamespaces[ns] {
				objects = append([]ObjectRef{{Version: "v1", Kind: "Namespace", Name: ns}}, objects...)
			}
			e.Namespaces = append(e.Namespaces, NamespaceUse{Namespace: ns, Reason: "is being deleted", Objects: objects})
		}
	}

	if len(e.MissingKinds)+len(e.Namespaces)+len(e.Unnamespaced) > 0 {
		return e
	}
	return nil
}

// definedKinds maps each kind (in each served version) that the bundle's CRDs define to
// whether it is namespaced.
func definedKinds(objs []*unstructured.Unstructured) map[schema.GroupVersionKind]bool {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, obj := range objs {
		if gvk := obj.GroupVersionKind(); !isCRD(gvk.Group, gvk.Kind) {
			continue
		}
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		for _, v := range versions {
			version, _ := v.(map[string]any)
			name, _, _ := unstructured.NestedString(version, "name")
			served, _, _ := unstructured.NestedBool(version, "served")
			if served && name != "" && kind != "" {
				kinds[schema.GroupVersionKind{Group: group, Version: name, Kind: kind}] = scope != "Cluster"
			}
		}
	}
	return kinds
}
