package acctest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// DenyConfigMap puts a ValidatingAdmissionPolicy, and its binding, in the cluster c reaches that
// refuses the ConfigMap named name alone (in any namespace; the other tests sharing the bed are
// not affected), with the message DeniedMessage(name), and waits until it is in force. The
// returned func removes it and waits until it is gone; it runs at cleanup too.
func DenyConfigMap(t *testing.T, c client.Client, name string) (remove func()) {
	t.Helper()
	policy, binding := denyPolicy(name)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, obj := range []*unstructured.Unstructured{policy, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	removed := false
	remove = func() {
		t.Helper()
		if removed {
			return
		}
		removed = true
		// Not t's context: remove runs at cleanup too, when it is done already.
		ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
		defer cancel()
		for _, obj := range []*unstructured.Unstructured{binding, policy} {
			if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", obj.GetName(), err)
			}
		}
		awaitDenied(t, c, name, false)
	}
	t.Cleanup(remove)
	// The API server compiles a new policy asynchronously: wait until it is in force (and gone,
	// in remove), so that the plan meets the state the test means.
	awaitDenied(t, c, name, true)
	return remove
}

// DeniedMessage is what DenyConfigMap's policy says of the ConfigMap name.
func DeniedMessage(name string) string { return name + " is refused by the test policy" }

// Words is a pattern matching text with any white space between its words: the CLIs wrap
// diagnostics at their width.
func Words(text string) string {
	return strings.Join(strings.Fields(regexp.QuoteMeta(text)), `\s+`)
}

func denyPolicy(name string) (policy, binding *unstructured.Unstructured) {
	policy = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": "deny-" + name},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"},
			}}},
			"validations": []any{map[string]any{
				"expression": fmt.Sprintf("object.metadata.name != '%s'", name),
				"message":    DeniedMessage(name),
			}},
		},
	}}
	binding = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": "deny-" + name},
		"spec":     map[string]any{"policyName": "deny-" + name, "validationActions": []any{"Deny"}},
	}}
	return policy, binding
}

// awaitDenied waits until a dry-run create of the ConfigMap name in default is denied (or, with
// denied false, allowed) by the cluster.
func awaitDenied(t *testing.T, c client.Client, name string, denied bool) {
	t.Helper()
	deadline := clock.System{}.Now().Add(30 * time.Second)
	// Not t's context: remove waits here at cleanup too, when it is done already.
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout+10*time.Second)
	defer cancel()
	for {
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
		}}
		err := c.Create(ctx, cm, client.DryRunAll)
		refused := err != nil && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err))
		if refused == denied && (denied || err == nil) {
			return
		}
		if (clock.System{}).Now().After(deadline) {
			t.Fatalf("the policy is not %s after 30s: last dry-run: %v", map[bool]string{true: "in force", false: "gone"}[denied], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
