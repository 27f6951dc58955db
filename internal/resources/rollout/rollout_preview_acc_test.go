package rollout_test

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

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// A ValidatingAdmissionPolicy in the canary cluster rejects the bundle's ConfigMap: the plan's
// dry-run preview fails the plan naming the cluster, the object and the policy's message, and
// nothing is written (no object, no record anywhere). With the policy removed, the plan shows
// what the canary would do, in counts.
func TestAccRollout_previewRejects(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider asks the fleet at plan time, not how a CLI drives it
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("preview")
	const canary = "prod-eu-1"
	// In namespace default, which exists, so the dry-run reaches admission (an object in a
	// namespace the bundle brings is counted created without the server's word).
	bundle := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {setting: v1}\n", name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	wc, err := f.WorkloadClient(canary)
	if err != nil {
		t.Fatal(err)
	}
	policy, binding := denyPolicy(name)
	for _, obj := range []*unstructured.Unstructured{policy, binding} {
		if err := wc.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	removePolicy := func() {
		for _, obj := range []*unstructured.Unstructured{binding, policy} {
			if err := wc.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", obj.GetName(), err)
			}
		}
	}
	t.Cleanup(removePolicy)
	// The API server compiles a new policy asynchronously: wait until it is in force (and
	// gone, below), so that the plan meets the state the test means.
	awaitDenied(t, wc, name, true)

	tf.writeConfig(blastConfig(f, name, `clusters = ["prod-eu-1", "staging-eu-1"]`+"\n  canary = [\"prod-eu-1\"]", bundle, ""))
	out := strings.Join(strings.Fields(tf.mustRun(ctx, 1, "plan")), " ")
	want := regexp.MustCompile(`Manifests Rejected By The API Server.*` + canary + `: ConfigMap default/` + name + `: .*` + name + ` is refused by the test policy`)
	if !want.MatchString(out) {
		t.Fatalf("plan output lacks %q:\n%s", want, out)
	}
	for _, cluster := range []string{canary, "staging-eu-1"} {
		if err := expectConfigMap(f, cluster, "default", name, false); err != nil {
			t.Error(err)
		}
		if st := workloadRecords(t, f, cluster, name); st.Current != nil || st.Provisioning != nil || len(st.Invalid)+len(st.Superseded) > 0 {
			t.Errorf("%s: records written by a refused plan: %+v", cluster, st)
		}
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger written by a refused plan: %+v", ledger)
	}

	removePolicy()
	awaitDenied(t, wc, name, false)
	// The CLI wraps warnings at its width: compare with white space collapsed.
	out = strings.Join(strings.Fields(tf.mustRun(ctx, 0, "plan")), " ")
	// The canary alone is dry-run (preview = "canary", the default).
	for _, s := range []string{"Dry-Run Preview", `(preview = "canary", time budget 30s): 1 of 1 clusters previewed`,
		canary + ": 1 created, 0 changed, 0 unchanged, 0 conflicting"} {
		if !strings.Contains(out, s) {
			t.Fatalf("plan output lacks %q:\n%s", s, out)
		}
	}
}

// denyPolicy is a ValidatingAdmissionPolicy, and its binding, that refuses the ConfigMap named
// name alone: the other tests sharing the bed are not affected.
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
				"message":    name + " is refused by the test policy",
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
		}}
		err := c.Create(context.Background(), cm, client.DryRunAll)
		refused := err != nil && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err))
		if refused == denied && (denied || err == nil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy is not %s after 30s: last dry-run: %v", map[bool]string{true: "in force", false: "gone"}[denied], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
