package apply

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fieldpath"
)

// IgnoreRule names fields that other controllers own (an HPA's .spec.replicas, cert-manager's
// .webhooks[*].clientConfig.caBundle) in the objects it matches: an empty Kind, Namespace or
// Name matches any.
type IgnoreRule struct {
	Kind      string
	Namespace string
	Name      string
	Paths     []fieldpath.Path
}

// Matches reports whether the rule applies to obj.
func (r IgnoreRule) Matches(obj *unstructured.Unstructured) bool {
	return (r.Kind == "" || r.Kind == obj.GetKind()) &&
		(r.Namespace == "" || r.Namespace == obj.GetNamespace()) &&
		(r.Name == "" || r.Name == obj.GetName())
}

// Ignore is a list of rules; see Applier.WithIgnore.
type Ignore []IgnoreRule

// pathsFor lists the paths ignored in obj.
func (ig Ignore) pathsFor(obj *unstructured.Unstructured) []fieldpath.Path {
	var out []fieldpath.Path
	for _, r := range ig {
		if r.Matches(obj) {
			out = append(out, r.Paths...)
		}
	}
	return out
}

// WithIgnore returns an Applier that shares a's clients and leaves the fields ig names to
// whoever else sets them:
//   - Apply sends an object that already exists without the ignored fields that another field
//     manager owns (so that manager keeps them and no conflict arises), and with the live value
//     of those no other manager owns (leaving them out would make the API server drop a field
//     only we owned). An object being created is sent as written: the manifest's value is the
//     starting point.
//   - Drift does not count differences in ignored fields.
//
// Readiness waits read status only, so they need nothing of ig.
func (a *Applier) WithIgnore(ig Ignore) *Applier {
	if len(ig) == 0 {
		return a
	}
	b := *a
	b.ignore = ig
	return &b
}

// keepIgnored rewrites the ignored fields of objs (copies, edited in place) as WithIgnore says.
func (a *Applier) keepIgnored(ctx context.Context, objs []*unstructured.Unstructured) error {
	if len(a.ignore) == 0 {
		return nil
	}
	for _, obj := range objs {
		paths := a.ignore.pathsFor(obj)
		if len(paths) == 0 {
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue // created by this apply: sent as written
		case err != nil:
			return &ObjectError{Object: RefOf(obj), Op: "read", Err: err}
		}
		others, err := a.othersFields(live)
		if err != nil {
			return &ObjectError{Object: RefOf(obj), Op: "read managed fields", Err: err}
		}
		for _, p := range paths {
			if ownedByAny(p, others) {
				p.Remove(obj.Object)
			} else {
				p.KeepLive(obj.Object, live.Object)
			}
		}
	}
	return nil
}

// othersFields decodes the managed fields of every field manager but ours (the legacy one
// included: its fields are taken over by the apply).
func (a *Applier) othersFields(live *unstructured.Unstructured) ([]map[string]any, error) {
	var out []map[string]any
	for _, mf := range live.GetManagedFields() {
		if a.ours(mf.Manager) || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			return nil, fmt.Errorf("manager %s: %w", mf.Manager, err)
		}
		out = append(out, fields)
	}
	return out, nil
}

func ownedByAny(p fieldpath.Path, managers []map[string]any) bool {
	for _, fields := range managers {
		if p.OwnedIn(fields) {
			return true
		}
	}
	return false
}

// withoutIgnored returns copies of live and merged without the fields paths names, for Drift.
func withoutIgnored(paths []fieldpath.Path, live, merged *unstructured.Unstructured) (*unstructured.Unstructured, *unstructured.Unstructured) {
	if len(paths) == 0 || live == nil || merged == nil {
		return live, merged
	}
	live, merged = live.DeepCopy(), merged.DeepCopy()
	for _, p := range paths {
		p.Remove(live.Object)
		p.Remove(merged.Object)
	}
	return live, merged
}
