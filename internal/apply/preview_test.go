package apply

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRejected: which dry-run errors are the server's verdict on the object (the plan fails
// on them) and which only say the cluster could not be asked (not previewed).
func TestRejected(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"admission policy (422)", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "web", nil), true},
		// 403 is also RBAC's answer to a plan-only identity: not a verdict on the object.
		{"forbidden (403)", apierrors.NewForbidden(cm, "web", errors.New("admission webhook denied the request")), false},
		{"schema: unknown field (400)", apierrors.NewBadRequest(`strict decoding error: unknown field "spec.replica"`), true},
		{"too large (413)", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{"wrapped in an ObjectError", &ObjectError{Op: "dry-run apply", Err: apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "web", nil)}, true},
		{"unavailable (503)", apierrors.NewServiceUnavailable("etcdserver: leader changed"), false},
		{"throttled (429)", apierrors.NewTooManyRequests("slow down", 1), false},
		{"timeout (504)", apierrors.NewTimeoutError("request timed out", 1), false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, false},
		{"deadline", fmt.Errorf("dry-run: %w", context.DeadlineExceeded), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rejected(tc.err); got != tc.want {
				t.Fatalf("Rejected(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
