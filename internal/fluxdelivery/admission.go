package fluxdelivery

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A revision that brings admission configuration (a webhook configuration, an admission policy)
// can break the admission of its own objects: a fail-closed webhook whose service is not there
// refuses every write of what it matches. Delivering directly the rollout's next write (its
// records) meets it. Through Flux the first reconcile does not: kustomize-controller dry-runs
// every object before it applies any, so the webhook is not there yet when the revision's own
// objects are checked, and the Kustomization reports Ready. Two consequences, handled here:
//
//   - Verifying such a revision asks kustomize-controller for one more reconcile
//     (RequestReconcile) and takes its verdict: its dry-runs now pass through the new admission.
//   - Restoring from such a revision cannot pin the backup at once: its dry-runs meet the
//     broken webhook and nothing is applied, so Flux never prunes the webhook. The backup is
//     first pinned disarmed (Disarmed): its admission configuration applied as it is (admission
//     webhooks never judge webhook configurations or policies), everything else left as it runs
//     (Flux's IfNotPresent skips an object that exists, with no dry-run, and keeps it in the
//     inventory), so Flux prunes what admission configuration the undone revision added. Then the
//     backup is pinned as it is, as delivering directly (world.go) deletes what the undone
//     revision added before it applies the backup.

// admissionGroup is the API group of webhook configurations and admission policies.
const admissionGroup = "admissionregistration.k8s.io"

// ssaAnnotation and ifNotPresent are kustomize-controller's per-object apply policy: an object
// marked IfNotPresent is created when missing and otherwise skipped (no dry-run, no apply),
// while staying in the Kustomization's inventory.
const (
	ssaAnnotation = "kustomize.toolkit.fluxcd.io/ssa"
	ifNotPresent  = "IfNotPresent"
)

// reconcileRequestedAt is Flux's annotation asking a controller for a reconcile now; the
// controller copies its value to status.lastHandledReconcileAt once it has handled it.
const reconcileRequestedAt = "reconcile.fluxcd.io/requestedAt"

// HoldsAdmission says whether objs hold admission configuration.
func HoldsAdmission(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if o.GroupVersionKind().Group == admissionGroup {
			return true
		}
	}
	return false
}

// Disarmed is objs as the first step of a restore from a revision that holds admission
// configuration: the admission configuration as it is, every other object marked IfNotPresent
// (copies; objs are not changed).
func Disarmed(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		if o.GroupVersionKind().Group == admissionGroup {
			out[i] = o
			continue
		}
		c := o.DeepCopy()
		annotations := c.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ssaAnnotation] = ifNotPresent
		c.SetAnnotations(annotations)
		out[i] = c
	}
	return out
}

// RequestReconcile asks kustomize-controller to reconcile cluster's Kustomization again now, with
// token (Status.Handled says token once it has): a merge patch of the annotation alone.
func (d *Delivery) RequestReconcile(ctx context.Context, namespace, cluster, token string) error {
	ks := d.object(KustomizationKind, namespace, cluster)
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{reconcileRequestedAt: token}}})
	if err != nil {
		return err
	}
	if err := d.mgmt.Patch(ctx, ks, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("request a reconcile of Kustomization %s/%s: %w", namespace, ks.GetName(), err)
	}
	return nil
}
