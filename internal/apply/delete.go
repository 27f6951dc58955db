package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// Kept is an object Prune or Delete left on the cluster, and why.
type Kept struct {
	Object ObjectRef `json:"object"`
	Reason string    `json:"reason"`
}

func (k Kept) String() string { return fmt.Sprintf("%s: kept: %s", k.Object, k.Reason) }

// DeleteResult says what Prune or Delete did. Objects already gone are in neither list.
type DeleteResult struct {
	// Deleted: deletion requested (background propagation: dependents go afterwards), or
	// already under way.
	Deleted []ObjectRef `json:"deleted,omitempty"`
	Kept    []Kept      `json:"kept,omitempty"`
}

// systemNamespaces are never deleted, whoever applied them.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// Prune deletes the objects of previous that objs no longer has, as Delete does.
func (a *Applier) Prune(ctx context.Context, previous Inventory, objs []*unstructured.Unstructured) (*DeleteResult, error) {
	return a.Delete(ctx, Diff(previous, InventoryOf(objs)))
}

// Delete deletes the objects of inv: dependents first, then Namespaces, then CRDs. Objects
// already gone are fine. It does not wait for the deletions to finish. Whatever inv says, it
// keeps (and reports in Kept):
//   - objects annotated or labelled gradual.dev/prune: disabled;
//   - the system namespaces (default, kube-*);
//   - objects that other field managers manage and the Applier's does not (someone else's
//     now, e.g. replaced, or another rollout's); the legacy field manager (DefaultFieldManager)
//     counts as the Applier's;
//   - Namespaces and CRDs that another field manager also manages, a Namespace that holds
//     objects not in inv (or kept), and a CRD whose custom resources are not all in inv (or
//     kept): deleting them would take those objects with them.
//
// Each object is deleted only if it is still the one that was read (UID precondition). It
// goes on past errors and returns them joined, naming the objects.
func (a *Applier) Delete(ctx context.Context, inv Inventory) (*DeleteResult, error) {
	res := &DeleteResult{}
	var errs []error
	// going is what goes: inv without the objects kept so far. Dependents come first, so a
	// Namespace or CRD is checked against it once its contents are settled.
	going := slices.Clone(inv)
	for _, ref := range deleteOrder(inv) {
		if err := ctx.Err(); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		deleted, reason, err := a.deleteOne(ctx, ref, going)
		switch {
		case err != nil:
			errs = append(errs, err)
		case reason != "":
			res.Kept = append(res.Kept, Kept{Object: ref, Reason: reason})
			going = slices.DeleteFunc(going, func(r ObjectRef) bool { return r.Identity() == ref.Identity() })
		case deleted:
			res.Deleted = append(res.Deleted, ref)
		}
	}
	return res, errors.Join(errs...)
}

// deleteOne deletes ref unless it must stay (keep says why); going is what else goes.
func (a *Applier) deleteOne(ctx context.Context, ref ObjectRef, going Inventory) (deleted bool, keep string, err error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(ref.GroupVersionKind())
	err = a.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return false, "", nil
	case err != nil:
		return false, "", &ObjectError{Object: ref, Op: "read", Err: err}
	case live.GetDeletionTimestamp() != nil:
		return true, "", nil
	}
	if keep, err = a.keepReason(ctx, ref, live, going); keep != "" || err != nil {
		return false, keep, err
	}
	uid := live.GetUID()
	err = a.client.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err):
		return false, "", nil
	case err != nil:
		return false, "", &ObjectError{Object: ref, Op: "delete", Err: err}
	}
	return true, "", nil
}

// keepReason says why live must stay, or "" when it may be deleted; going is what else goes.
func (a *Applier) keepReason(ctx context.Context, ref ObjectRef, live *metav1.PartialObjectMetadata, going Inventory) (string, error) {
	if live.GetAnnotations()[PruneAnnotation] == "disabled" || live.GetLabels()[PruneAnnotation] == "disabled" {
		return PruneAnnotation + ": disabled", nil
	}
	namespace, crd := isNamespace(ref.Group, ref.Kind), isCRD(ref.Group, ref.Kind)
	if namespace && slices.Contains(systemNamespaces, ref.Name) {
		return "system namespace", nil
	}
	// An object whose applied fields are only its name (a bare Namespace) has no managed
	// fields entry of ours: the API server drops empty ones. So only another manager's
	// entry without ours says the object is someone else's now (replaced, or taken over).
	// The legacy field manager (DefaultFieldManager) is ours: objects applied before each
	// rollout had its own manager are still only its.
	managers := managersOf(live.GetManagedFields())
	ours := slices.ContainsFunc(managers, a.ours)
	others := slices.DeleteFunc(managers, a.ours)
	switch {
	case !ours && len(others) > 0:
		return fmt.Sprintf("managed by field manager %s, not by %q", quoteAll(others), a.opts.FieldManager), nil
	case !namespace && !crd:
		return "", nil
	case len(others) > 0:
		return fmt.Sprintf("also managed by field manager %s", quoteAll(others)), nil
	}
	var foreign []ObjectRef
	var err error
	if crd {
		foreign, err = a.foreignCustomResources(ctx, ref, going)
	} else {
		foreign, err = a.foreignNamespaceContent(ctx, ref.Name, going)
	}
	if err != nil {
		return "", &ObjectError{Object: ref, Op: "check what it holds", Err: err}
	}
	if len(foreign) == 0 {
		return "", nil
	}
	what := "holds objects"
	if crd {
		what = "has custom resources"
	}
	return fmt.Sprintf("%s not being deleted: %s", what, sample(foreign, 3)), nil
}

// foreignCustomResources lists the custom resources of the CRD ref that inv does not hold,
// leaving out those being deleted.
func (a *Applier) foreignCustomResources(ctx context.Context, ref ObjectRef, inv Inventory) ([]ObjectRef, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(ref.GroupVersionKind())
	if err := a.client.Get(ctx, client.ObjectKey{Name: ref.Name}, crd); err != nil {
		return nil, err
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if served, _, _ := unstructured.NestedBool(vm, "served"); served {
			version, _, _ = unstructured.NestedString(vm, "name")
			break
		}
	}
	if version == "" || kind == "" {
		return nil, nil // serves nothing: holds nothing anyone can reach
	}
	return a.foreignObjects(ctx, schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, "", inv, nil)
}

// foreignNamespaceContent lists the objects in namespace that inv does not hold and that would
// go with it: every listable kind, leaving out events, objects with an owner (deleted along
// with it: pods of a deployment), objects being deleted, and what Kubernetes puts in every
// namespace (the default ServiceAccount, kube-root-ca.crt, the Endpoints of a Service).
func (a *Applier) foreignNamespaceContent(ctx context.Context, namespace string, inv Inventory) ([]ObjectRef, error) {
	lists, err := a.discovery.ServerPreferredNamespacedResources()
	if err != nil {
		// Some API group did not answer: what it serves may be in the namespace.
		return nil, fmt.Errorf("list the namespaced kinds: %w", err)
	}
	var out []ObjectRef
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") ||
				r.Name == "events" && (gv.Group == "" || gv.Group == "events.k8s.io") {
				continue
			}
			if out, err = a.foreignObjects(ctx, gv.WithKind(r.Kind), namespace, inv, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// foreignObjects appends to out the objects of kind gvk (in namespace, or everywhere when
// namespace is "") that inv does not hold, have no owner and are not being deleted.
func (a *Applier) foreignObjects(ctx context.Context, gvk schema.GroupVersionKind, namespace string, inv Inventory, out []ObjectRef) ([]ObjectRef, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := a.client.List(ctx, list, opts...); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || meta.IsNoMatchError(err) {
			return out, nil
		}
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	for _, item := range list.Items {
		ref := ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: item.Namespace, Name: item.Name}
		if len(item.OwnerReferences) > 0 || item.DeletionTimestamp != nil || inv.Contains(ref) || builtIn(ref, inv) {
			continue
		}
		out = append(out, ref)
	}
	return out, nil
}

// builtIn reports whether Kubernetes made ref itself.
func builtIn(ref ObjectRef, inv Inventory) bool {
	if ref.Group != "" {
		return false
	}
	switch ref.Kind {
	case "ServiceAccount":
		return ref.Name == "default"
	case "ConfigMap":
		return ref.Name == "kube-root-ca.crt"
	case "Endpoints":
		return inv.Contains(ObjectRef{Kind: "Service", Namespace: ref.Namespace, Name: ref.Name})
	}
	return false
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func sample(refs []ObjectRef, n int) string {
	s := refList(refs[:min(n, len(refs))])
	if len(refs) > n {
		s += fmt.Sprintf(" and %d more", len(refs)-n)
	}
	return s
}

// WaitDeleted waits until every object of refs is gone (Delete does not wait), polling every
// PollInterval until ctx ends; the error names what is still there. A restore that removes a
// revision is complete only then: a Namespace still terminating would refuse the next apply.
func (a *Applier) WaitDeleted(ctx context.Context, refs []ObjectRef) error {
	pending := slices.Clone(refs)
	for {
		var still []ObjectRef
		for _, ref := range pending {
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(ref.GroupVersionKind())
			err := a.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
			switch {
			case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			case err != nil && ctx.Err() == nil:
				return fmt.Errorf("%s: %w", ref, err)
			default:
				still = append(still, ref)
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		if clock.Sleep(ctx, a.opts.PollInterval) != nil {
			names := make([]string, len(still))
			for i, r := range still {
				names[i] = r.String()
			}
			return fmt.Errorf("still being deleted: %s: %w", strings.Join(names, ", "), ctx.Err())
		}
	}
}
