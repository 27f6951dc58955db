package apply

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
)

// readyDeployment is a Deployment kstatus calls Current, with annotations.
func readyDeployment(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "default", "generation": int64(1)},
		"spec":     map[string]any{"replicas": int64(1)},
		"status": map[string]any{
			"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1),
			"readyReplicas": int64(1), "availableReplicas": int64(1),
			"conditions": []any{map[string]any{"type": "Available", "status": "True"}},
		},
	}}
	u.SetAnnotations(annotations)
	return u
}

// TestWaitHealthExpressions: a Deployment kstatus calls ready is judged by its expressions; a
// current expression never true is a timeout naming it, a failed one true fails at once.
func TestWaitHealthExpressions(t *testing.T) {
	checker, err := health.Compile([]health.Rule{{
		APIVersion: "apps/v1", Kind: "Deployment",
		Current: "has(metadata.annotations) && metadata.annotations['smoke'] == 'passed'",
		Failed:  "has(metadata.annotations) && metadata.annotations['smoke'] == 'failed'",
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		wantErr     string
		wantTimeout bool
	}{
		{"current", map[string]string{"smoke": "passed"}, "", false},
		{"never current", nil, "not ready after", true},
		{"failed", map[string]string{"smoke": "failed"}, "not ready, failed: Deployment default/web: Failed: health expression failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := readyDeployment(tc.annotations)
			if s := statusOf(obj); s.Status != "Current" {
				t.Fatalf("kstatus says %+v; the test needs a ready Deployment", s)
			}
			cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(obj.DeepCopy()).Build()
			a := (&Applier{client: cl, opts: Options{PollInterval: 10 * time.Millisecond}}).WithHealth(checker)
			start := time.Now()
			err := a.Wait(context.Background(), []*unstructured.Unstructured{obj}, 300*time.Millisecond)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Wait = %v, want nil", err)
				}
				return
			}
			var nre *NotReadyError
			if !errors.As(err, &nre) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Wait = %v, want a NotReadyError with %q", err, tc.wantErr)
			}
			if (nre.Timeout > 0) != tc.wantTimeout {
				t.Errorf("Timeout = %s, want a timeout: %v", nre.Timeout, tc.wantTimeout)
			}
			if !tc.wantTimeout && time.Since(start) > 200*time.Millisecond {
				t.Errorf("a failed expression waited %s; it should fail at once", time.Since(start))
			}
		})
	}
}
