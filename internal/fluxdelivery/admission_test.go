package fluxdelivery

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDisarmed: the first pin of a restore from a revision with admission configuration applies
// that configuration as it is and skips every other object that exists (IfNotPresent), leaving
// the objects given unchanged.
func TestDisarmed(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "app"}}}
	webhook := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1",
		"kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": "policy"}}}
	if HoldsAdmission([]*unstructured.Unstructured{cm}) || !HoldsAdmission([]*unstructured.Unstructured{cm, webhook}) {
		t.Fatal("HoldsAdmission: want true with the webhook configuration alone")
	}
	out := Disarmed([]*unstructured.Unstructured{cm, webhook})
	if got := out[0].GetAnnotations()[ssaAnnotation]; got != ifNotPresent {
		t.Errorf("ConfigMap's %s = %q, want %s", ssaAnnotation, got, ifNotPresent)
	}
	if out[1].GetAnnotations()[ssaAnnotation] != "" {
		t.Error("the webhook configuration is skipped: Flux would never prune or revert it")
	}
	if cm.GetAnnotations() != nil {
		t.Error("Disarmed changed the objects it was given")
	}
}

// TestStatusReadsTheHandledReconcile: Status.Handled is the token of the last reconcile request
// kustomize-controller handled, which confirm waits for.
func TestStatusReadsTheHandledReconcile(t *testing.T) {
	ks := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "k", "namespace": "fleet"},
		"status":   map[string]any{"lastHandledReconcileAt": "t-1"}}}
	if st := statusOf(ks); st.Handled != "t-1" {
		t.Fatalf("Handled = %q, want t-1", st.Handled)
	}
}
