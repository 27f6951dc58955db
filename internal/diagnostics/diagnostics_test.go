package diagnostics

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// rbacDenied is a 403 as kube-apiserver's RBAC authorizer words it.
func rbacDenied() error {
	return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "gradual.rollout-x",
		errors.New(`User "system:serviceaccount:ci:plan" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "gradual-system"`))
}

func TestPermissionHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantHint bool
		summary  string
	}{
		{"wrapped RBAC refusal", fmt.Errorf("acquire the Lease: %w", rbacDenied()), true, "Rollout Failed"},
		{"usererr around an RBAC refusal", usererr.Wrap(rbacDenied(), "Cannot Write Records", "Writing the records failed."), true, "Cannot Write Records"},
		{"RBAC refusal among several", errors.Join(errors.New("prod-eu-1: timeout"), fmt.Errorf("staging-eu-1: %w", rbacDenied())), true, "Rollout Failed"},
		{"admission webhook refusal", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x",
			errors.New(`admission webhook "deny.example.com" denied the request: no`)), false, "Rollout Failed"},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x"), false, "Rollout Failed"},
		{"plain error", errors.New("boom"), false, "Rollout Failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := FromError(tc.err, "Rollout Failed")
			if d.Summary() != tc.summary {
				t.Errorf("summary %q, want %q", d.Summary(), tc.summary)
			}
			hinted := strings.Contains(d.Detail(), "Missing Kubernetes permission: ")
			if hinted != tc.wantHint {
				t.Fatalf("hint given: %v, want %v; detail:\n%s", hinted, tc.wantHint, d.Detail())
			}
			if !tc.wantHint {
				return
			}
			for _, want := range []string{`cannot create resource "leases" in API group "coordination.k8s.io"`, `"system:serviceaccount:ci:plan"`,
				"`<name>-kubeconfig` Secret", "management cluster", "docs/guides/rbac.md"} {
				if !strings.Contains(d.Detail(), want) {
					t.Errorf("detail lacks %q:\n%s", want, d.Detail())
				}
			}
			if !strings.HasPrefix(d.Detail(), strings.Split(tc.err.Error(), ":")[0]) && tc.summary == "Rollout Failed" {
				t.Errorf("the error itself should come first:\n%s", d.Detail())
			}
		})
	}
}
