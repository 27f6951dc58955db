package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxSavedSize bounds the content Existing saves of one object (its JSON). Records keep it so
// that a failed first revision can put the object back as it was; a larger object is recorded
// without its content and is only given back, as the failed revision left it.
const MaxSavedSize = 256 << 10

// Existing is an object of a bundle that is already on the cluster.
type Existing struct {
	Object ObjectRef
	// Managers are the field managers of its main resource (status writers left out), sorted.
	Managers []string
	// Saved is its content as found, without status and server-set metadata (see savedContent);
	// nil when it is larger than MaxSavedSize. SavedSize is that size either way.
	Saved     json.RawMessage
	SavedSize int
	// Bridge is the object's gradual.dev/bridge annotation: the field manager of the module
	// whose bridge (a ClusterResourceSet, internal/crsbridge) created it on a cluster that
	// joined between applies; "" for any other object.
	Bridge string
}

// AnnotationBridge marks the objects a module assignment's bridge hands to joiners
// (internal/crsbridge sets it; the value is the module's field manager).
const AnnotationBridge = "gradual.dev/bridge"

// Bridged reports whether our own bridge created the object: it is ours to take over, not
// someone else's to adopt, though Cluster API's field manager made it.
func (e Existing) Bridged(ours string) bool { return e.Bridge != "" && e.Bridge == ours }

// Foreign reports whether a field manager other than ours manages the object, or none does
// (it predates field management): someone else made it. An object only we manage was made by
// this provider, even when no record says so (records deleted by hand). The legacy field
// manager (DefaultFieldManager, which every rollout shared before each had its own) counts as
// ours.
func (e Existing) Foreign(ours string) bool {
	return len(e.Managers) == 0 || slices.ContainsFunc(e.Managers, func(m string) bool { return m != ours && m != DefaultFieldManager })
}

// Existing reads which objects of objs are on the cluster, with their field managers and their
// content. It makes no mutating calls. Objects whose kind the cluster does not serve yet (a CRD
// of the bundle not applied), or whose namespace it lacks, are not there.
func (a *Applier) Existing(ctx context.Context, objs []*unstructured.Unstructured) ([]Existing, error) {
	found := make([]*Existing, len(objs))
	absent := a.inMissingNamespace(ctx, objs, nil)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for i, obj := range objs {
		if absent(obj) {
			continue // no object is in a namespace the cluster lacks
		}
		g.Go(func() error {
			ref := RefOf(obj)
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(ref.GroupVersionKind())
			err := a.client.Get(gctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
			switch {
			case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
				return nil
			case err != nil:
				return &ObjectError{Object: ref, Op: "read", Err: err}
			case live.GetDeletionTimestamp() != nil:
				return nil // going: what the bundle applies will be a new object
			}
			e := &Existing{Object: ref, Managers: managersOf(live.GetManagedFields()), Bridge: live.GetAnnotations()[AnnotationBridge]}
			raw, err := json.Marshal(savedContent(live))
			if err != nil {
				return &ObjectError{Object: ref, Op: "save", Err: err}
			}
			e.SavedSize = len(raw)
			if len(raw) <= MaxSavedSize {
				e.Saved = raw
			}
			found[i] = e
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []Existing
	for _, e := range found {
		if e != nil {
			out = append(out, *e)
		}
	}
	return out, nil
}

// savedContent is live without what the API server owns (status, uid, resourceVersion,
// managedFields, timestamps, generation): what applying it again sets.
func savedContent(live *unstructured.Unstructured) map[string]any {
	obj := live.DeepCopy()
	delete(obj.Object, "status")
	md, _ := obj.Object["metadata"].(map[string]any)
	for _, f := range []string{"uid", "resourceVersion", "managedFields", "creationTimestamp", "generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		delete(md, f)
	}
	return obj.Object
}

// Release gives the objects of refs back to their other owners: it removes this Applier's
// field manager (and the legacy one, DefaultFieldManager, ours too) from their managed fields
// and changes nothing else. Objects gone are fine.
//
// Why not apply an empty configuration instead (server-side apply's way to give fields up)?
// Fields only we own would then be removed from the object, not handed over: an adopted
// Deployment whose replicas we set would lose them. Editing managedFields leaves every value
// as it is; fields only we managed are then managed by no one, as a field created with a
// plain update before field management was. Each write is guarded by the resourceVersion read,
// so a concurrent writer is never overwritten; a conflict is retried from a fresh read.
func (a *Applier) Release(ctx context.Context, refs []ObjectRef) error {
	return a.editManagedFields(ctx, refs, "release", func(live *metav1.PartialObjectMetadata) ([]metav1.ManagedFieldsEntry, bool, error) {
		all := live.GetManagedFields()
		kept := slices.DeleteFunc(slices.Clone(all), func(mf metav1.ManagedFieldsEntry) bool { return a.ours(mf.Manager) })
		return kept, len(kept) != len(all), nil
	})
}

// TakeOver makes the objects of refs, which our own bridge created on a cluster that joined
// between applies (Existing.Bridged), ours: the creator's field manager entry (the oldest of
// the update operations: ClusterResourceSet creates each object once and writes it no more) is
// renamed to this Applier's field manager, as an apply. Other writers' entries are left alone,
// so a controller that set a field since keeps it. Each write is guarded by the resourceVersion
// read. Objects gone are fine.
func (a *Applier) TakeOver(ctx context.Context, refs []ObjectRef) error {
	return a.editManagedFields(ctx, refs, "take over", func(live *metav1.PartialObjectMetadata) ([]metav1.ManagedFieldsEntry, bool, error) {
		if live.GetAnnotations()[AnnotationBridge] != a.opts.FieldManager {
			return nil, false, nil
		}
		creator := -1
		for i, e := range live.GetManagedFields() {
			if e.Operation == metav1.ManagedFieldsOperationUpdate && !a.ours(e.Manager) && e.Subresource == "" &&
				(creator < 0 || e.Time != nil && live.GetManagedFields()[creator].Time != nil && e.Time.Before(live.GetManagedFields()[creator].Time)) {
				creator = i
			}
		}
		if creator < 0 {
			return nil, false, nil
		}
		u := &unstructured.Unstructured{}
		u.SetManagedFields(live.GetManagedFields())
		name := live.GetManagedFields()[creator].Manager
		patches, err := ssa.PatchReplaceFieldsManagers(u, []ssa.FieldManager{{Name: name, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationUpdate}}, a.opts.FieldManager)
		if err != nil || len(patches) == 0 {
			return nil, false, err
		}
		return patches[0].Value, true, nil
	})
}

// Forget drops manager's apply entries from the objects of refs: the fields only it set stay
// on the objects, owned by no one, and those it set along with this Applier's field manager are
// this Applier's alone. It is how a rollout moving from Flux to direct delivery takes over what
// kustomize-controller applied once its Kustomization is gone: its next revision changes or
// drops those fields without a conflict with a manager that no longer runs, and the labels Flux
// added, set by no one now, are no drift of the rollout's. Other writers' entries are left
// alone. Each write is guarded by the resourceVersion read. Objects gone are fine.
func (a *Applier) Forget(ctx context.Context, refs []ObjectRef, manager string) error {
	if manager == "" || a.ours(manager) {
		return nil
	}
	return a.editManagedFields(ctx, refs, "forget", func(live *metav1.PartialObjectMetadata) ([]metav1.ManagedFieldsEntry, bool, error) {
		entries := live.GetManagedFields()
		kept := slices.DeleteFunc(slices.Clone(entries), func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply
		})
		// An empty list would have the API server start the object's ownership over: keep one.
		if len(kept) == len(entries) || len(kept) == 0 {
			return nil, false, nil
		}
		return kept, true, nil
	})
}

// Orphan leaves the objects of refs to whichever rollout applies them next: it hands the
// fields this Applier's field manager owns to the legacy one (DefaultFieldManager), which
// every rollout counts as its own, and changes nothing else. An object left behind (a
// destroy or a cluster leaving with deletion_policy = "orphan") would otherwise stay owned by
// a rollout that no longer exists, and every other rollout would refuse it as that one's.
// Objects gone are fine.
func (a *Applier) Orphan(ctx context.Context, refs []ObjectRef) error {
	if a.opts.FieldManager == DefaultFieldManager {
		return nil
	}
	own := []ssa.FieldManager{{Name: a.opts.FieldManager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationApply}}
	return a.editManagedFields(ctx, refs, "orphan", func(live *metav1.PartialObjectMetadata) ([]metav1.ManagedFieldsEntry, bool, error) {
		u := &unstructured.Unstructured{}
		u.SetManagedFields(live.GetManagedFields())
		patches, err := ssa.PatchReplaceFieldsManagers(u, own, DefaultFieldManager)
		if err != nil || len(patches) == 0 {
			return nil, false, err
		}
		return patches[0].Value, true, nil
	})
}

// editManagedFields replaces the managed fields of each object of refs with what edit makes
// of them (changed false: leave them), guarded by the resourceVersion read.
func (a *Applier) editManagedFields(ctx context.Context, refs []ObjectRef, op string,
	edit func(live *metav1.PartialObjectMetadata) ([]metav1.ManagedFieldsEntry, bool, error)) error {
	var errs []error
	for _, ref := range refs {
		if err := a.editOne(ctx, ref, op, edit); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Applier) editOne(ctx context.Context, ref ObjectRef, op string,
	edit func(live *metav1.PartialObjectMetadata) ([]metav1.ManagedFieldsEntry, bool, error)) error {
	const attempts = 5
	var err error
	for range attempts {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(ref.GroupVersionKind())
		err = a.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			return nil
		case err != nil:
			return &ObjectError{Object: ref, Op: "read", Err: err}
		}
		entries, changed, eerr := edit(live)
		switch {
		case eerr != nil:
			return &ObjectError{Object: ref, Op: op, Err: eerr}
		case !changed:
			return nil // nothing of ours (any more)
		}
		var value any = entries
		if len(entries) == 0 {
			// An empty list means "leave managedFields as they are" to the API server; one
			// empty entry is how a client clears them.
			value = []map[string]any{{}}
		}
		patch, merr := json.Marshal([]map[string]any{
			{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
			{"op": "replace", "path": "/metadata/managedFields", "value": value},
		})
		if merr != nil {
			return &ObjectError{Object: ref, Op: op, Err: merr}
		}
		err = a.client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) || apierrors.IsInvalid(err) && live.GetResourceVersion() != "":
			continue // changed since the read (a failed test op is Invalid or Conflict): read again
		default:
			return &ObjectError{Object: ref, Op: op, Err: err}
		}
	}
	return &ObjectError{Object: ref, Op: op, Err: fmt.Errorf("changed by another writer %d times in a row: %w", attempts, err)}
}

// Revert puts objects back to saved content (what Existing saved before a revision overwrote
// them) and then releases them. It applies saved with our field manager, forcing: the fields
// only the failed revision set are dropped (we were their only owner) and the others take
// their saved values; Release then hands every field back.
func (a *Applier) Revert(ctx context.Context, saved []*unstructured.Unstructured) error {
	if len(saved) == 0 {
		return nil
	}
	opts := ssa.DefaultApplyOptions()
	opts.Force = a.opts.RecreateImmutable
	opts.Cleanup = a.migrateLegacy()
	var errs []error
	var refs []ObjectRef
	for _, obj := range copies(saved) {
		ref := RefOf(obj)
		if _, err := a.reader.Apply(ctx, obj, opts); err != nil {
			errs = append(errs, &ObjectError{Object: ref, Op: "revert", Err: err})
			continue
		}
		refs = append(refs, ref)
	}
	if err := a.Release(ctx, refs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// managersOf lists the managers of an object's main resource (status writers left out), sorted.
func managersOf(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, mf := range entries {
		if mf.Subresource == "" && !slices.Contains(out, mf.Manager) {
			out = append(out, mf.Manager)
		}
	}
	slices.Sort(out)
	return out
}
