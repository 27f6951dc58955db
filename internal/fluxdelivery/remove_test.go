package fluxdelivery

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// heldObjects are cluster c1's Kustomization and the OCIRepository it names, each held by its controller's
// finalizer as Flux's controllers hold them until they have pruned or dropped the artifact.
func heldObjects(d *Delivery) (ks, src *unstructured.Unstructured) {
	ks, src = d.object(KustomizationKind, "fleet", "c1"), d.source("fleet", "sha256:aa")
	ks.Object["spec"] = map[string]any{"sourceRef": map[string]any{"kind": OCIRepositoryKind.Kind, "name": src.GetName()}} // as Pin writes it
	ks.SetFinalizers([]string{"finalizers.fluxcd.io"})
	src.SetFinalizers([]string{"finalizers.fluxcd.io"})
	return ks, src
}

// release drops obj's finalizer, as its controller does once done, so the API server removes it.
func release(t *testing.T, c client.Client, obj *unstructured.Unstructured) {
	t.Helper()
	live := obj.DeepCopy()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), live); err != nil {
		t.Fatalf("read %s to release it: %v", obj.GetKind(), err)
	}
	live.SetFinalizers(nil)
	if err := c.Update(context.Background(), live); err != nil {
		t.Fatalf("release %s: %v", obj.GetKind(), err)
	}
}

// TestRemoveWaitsUntilBothObjectsAreGone: Remove returns only once the Kustomization and then
// the OCIRepository have left the API server, not when their deletion was merely accepted.
func TestRemoveWaitsUntilBothObjectsAreGone(t *testing.T) {
	d := &Delivery{key: watchKey}
	ks, src := heldObjects(d)
	d.mgmt = fake.NewClientBuilder().WithObjects(ks, src).Build()

	done := make(chan error, 1)
	go func() { done <- d.Remove(context.Background(), "fleet", "c1", time.Millisecond, false) }()
	deleting := func(obj *unstructured.Unstructured) func() bool {
		return func() bool {
			live := obj.DeepCopy()
			return d.mgmt.Get(context.Background(), client.ObjectKeyFromObject(obj), live) == nil && live.GetDeletionTimestamp() != nil
		}
	}
	waitFor(t, "the Kustomization being deleted", deleting(ks))
	time.Sleep(20 * time.Millisecond)
	if returned(done) {
		t.Fatal("Remove returned while the Kustomization was still there")
	}
	release(t, d.mgmt, ks)
	waitFor(t, "the OCIRepository being deleted", deleting(src))
	time.Sleep(20 * time.Millisecond)
	if returned(done) {
		t.Fatal("Remove returned while the OCIRepository was still there")
	}
	release(t, d.mgmt, src)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Remove: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Remove did not return once both objects were gone")
	}
	for _, obj := range []*unstructured.Unstructured{ks, src} {
		if err := d.mgmt.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopy()); !apierrors.IsNotFound(err) {
			t.Errorf("%s after Remove: %v, want not found", obj.GetKind(), err)
		}
	}
}

// TestRemoveSaysWhatIsStillThere: when source-controller never lets its OCIRepository go
// (stopped), Remove fails when ctx ends, naming the object and what holds it.
func TestRemoveSaysWhatIsStillThere(t *testing.T) {
	d := &Delivery{key: watchKey}
	ks, src := heldObjects(d)
	ks.SetFinalizers(nil) // kustomize-controller done at once
	d.mgmt = fake.NewClientBuilder().WithObjects(ks, src).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := d.Remove(ctx, "fleet", "c1", time.Millisecond, false)
	if err == nil || !strings.Contains(err.Error(), "OCIRepository fleet/"+src.GetName()+" not gone") || !strings.Contains(err.Error(), "source-controller") {
		t.Fatalf("Remove with the OCIRepository held: %v, want an error naming it and source-controller", err)
	}
}

func returned(ch <-chan error) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestRemoveOrphanTurnsPruningOffFirst: with orphan, the Kustomization's spec.prune is false when
// it is deleted (kustomize-controller reads it as it finalizes, and prunes nothing); without, it
// is deleted as it is.
func TestRemoveOrphanTurnsPruningOffFirst(t *testing.T) {
	for _, orphan := range []bool{false, true} {
		d := &Delivery{key: watchKey}
		ks, src := heldObjects(d)
		ks.SetFinalizers(nil)
		src.SetFinalizers(nil)
		if err := unstructured.SetNestedField(ks.Object, true, "spec", "prune"); err != nil {
			t.Fatal(err)
		}
		var pruneAtDelete any = "not deleted"
		base := fake.NewClientBuilder().WithObjects(ks, src).Build()
		d.mgmt = interceptor.NewClient(base, interceptor.Funcs{
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if obj.GetObjectKind().GroupVersionKind().Kind == KustomizationKind.Kind {
					live := ks.DeepCopy()
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil {
						pruneAtDelete, _, _ = unstructured.NestedFieldNoCopy(live.Object, "spec", "prune")
					}
				}
				return c.Delete(ctx, obj, opts...)
			},
		})
		if err := d.Remove(context.Background(), "fleet", "c1", time.Millisecond, orphan); err != nil {
			t.Fatalf("orphan=%t: %v", orphan, err)
		}
		if want := !orphan; pruneAtDelete != want {
			t.Errorf("orphan=%t: spec.prune at deletion = %v, want %t", orphan, pruneAtDelete, want)
		}
	}
}
