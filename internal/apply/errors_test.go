package apply

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var (
	web = ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}
	cfg = ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "cfg"}
)

func TestErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{{
		name: "check",
		err: &CheckError{
			MissingKinds: []KindUse{{APIVersion: "example.com/v1", Kind: "Widget", Objects: []ObjectRef{
				{Group: "example.com", Version: "v1", Kind: "Widget", Namespace: "demo", Name: "a"},
				{Group: "example.com", Version: "v1", Kind: "Widget", Namespace: "demo", Name: "b"},
			}}},
			Namespaces:   []NamespaceUse{{Namespace: "gone", Reason: "does not exist", Objects: []ObjectRef{cfg}}},
			Unnamespaced: []ObjectRef{{Version: "v1", Kind: "Service", Name: "svc"}},
		},
		want: "cannot apply to this cluster: kind Widget (apiVersion example.com/v1) is not served by the cluster and no CRD in the manifests defines it; used by Widget demo/a, Widget demo/b; " +
			"namespace gone does not exist; used by ConfigMap demo/cfg; Service svc: namespaced kind without metadata.namespace",
	}, {
		name: "not ready after timeout",
		err: &NotReadyError{Timeout: 90 * time.Second, Objects: []ObjectStatus{
			{Object: web, Status: "InProgress", Message: "Available: 0/2"},
			{Object: cfg, Status: "NotFound", Message: "object not found"},
		}},
		want: "not ready after 1m30s: Deployment demo/web: InProgress: Available: 0/2; ConfigMap demo/cfg: NotFound: object not found",
	}, {
		name: "failed",
		err: &NotReadyError{Objects: []ObjectStatus{
			{Object: web, Status: "Failed", Message: `ProgressDeadlineExceeded: ReplicaSet "web-5d8" has timed out progressing.`},
		}},
		want: `not ready, failed: Deployment demo/web: Failed: ProgressDeadlineExceeded: ReplicaSet "web-5d8" has timed out progressing.`,
	}, {
		name: "conflict",
		err: &ConflictError{Object: web, Conflicts: []FieldConflict{
			{Manager: "flux", Field: ".spec.replicas", Applied: true},
			{Manager: "argocd", Field: ".spec.template.spec.containers[name=\"web\"].image", Applied: true},
			{Manager: "flux", Field: ".metadata.labels.app", Applied: true},
		}},
		want: `Deployment demo/web: server-side apply conflict: .spec.template.spec.containers[name="web"].image owned by field manager "argocd"; ` +
			`.spec.replicas, .metadata.labels.app owned by field manager "flux"; another tool applies these fields: stop managing them in one of the two, or force conflicts to take them over`,
	}, {
		name: "conflict with another rollout",
		err: &ConflictError{Object: cfg, Conflicts: []FieldConflict{
			{Manager: "gradual/rollout/team-a/web", Field: ".data.color", Applied: true},
		}},
		want: `ConfigMap demo/cfg: server-side apply conflict: .data.color owned by rollout team-a/web; another rollout or module assignment ` +
			`applies these fields, and an object has one owner: leave it to one of the two (forcing conflicts does not take fields from another rollout)`,
	}, {
		name: "object",
		err:  &ObjectError{Object: cfg, Op: "delete", Err: errors.New("boom")},
		want: "ConfigMap demo/cfg: delete: boom",
	}, {
		name: "drift",
		err:  errors.New(Drift{Object: web, State: Modified, Fields: []string{".spec.replicas"}}.String()),
		want: "Deployment demo/web: modified (.spec.replicas)",
	}, {
		name: "kept",
		err:  errors.New(Kept{Object: ObjectRef{Version: "v1", Kind: "Namespace", Name: "demo"}, Reason: "holds objects not being deleted: ConfigMap demo/x"}.String()),
		want: "Namespace demo: kept: holds objects not being deleted: ConfigMap demo/x",
	}} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func conflictError(messages ...string) error {
	causes := make([]metav1.StatusCause, len(messages))
	for i, m := range messages {
		causes[i] = metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: m, Field: ".data.k" + string(rune('0'+i))}
	}
	return apierrors.NewApplyConflict(causes, "Apply failed")
}

func TestFieldConflicts(t *testing.T) {
	got := fieldConflicts(conflictError(
		`conflict with "flux"`,
		`conflict with "kubectl-edit" using v1`,
		`conflict with "hpa" with subresource "scale" using autoscaling/v1 at 2026-01-02T03:04:05Z`,
		`conflict with something unexpected`,
	))
	want := []FieldConflict{
		{Manager: "flux", Field: ".data.k0", Applied: true},
		{Manager: "kubectl-edit", Field: ".data.k1"},
		{Manager: "hpa", Field: ".data.k2"},
		{Manager: "something unexpected", Field: ".data.k3", Applied: true}, // unreadable: the safe side
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fieldConflicts =\n %+v\nwant\n %+v", got, want)
	}
	if fieldConflicts(apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "cfg", errors.New("stale"))) != nil {
		t.Error("a resourceVersion conflict is not a field conflict")
	}
}

// TestVetConflicts drives the conflict vetting against a client that answers an unforced
// dry-run apply with a given conflict, and records what was sent.
func TestVetConflicts(t *testing.T) {
	a := &Applier{opts: Options{FieldManager: "gradual"}}
	mine := &Applier{opts: Options{FieldManager: "gradual/rollout/team-a/web"}}
	forcing := &Applier{opts: Options{FieldManager: "gradual/rollout/team-a/web", ForceConflicts: true}}
	apply := []client.PatchOption{client.DryRunAll, client.ForceOwnership, client.FieldOwner("gradual")}
	for _, tc := range []struct {
		name     string
		applier  *Applier
		conflict error
		opts     []client.PatchOption
		wantErr  string
		wantSent []bool // Force of each patch sent
	}{
		{name: "no conflict", opts: apply, wantSent: []bool{false}},
		{name: "update managers are overridden", conflict: conflictError(`conflict with "kubectl-edit" using v1`), opts: apply, wantSent: []bool{false, true}},
		{name: "appliers are refused", conflict: conflictError(`conflict with "kubectl-edit" using v1`, `conflict with "flux"`), opts: apply,
			wantErr: `ConfigMap demo/cfg: server-side apply conflict: .data.k1 owned by field manager "flux"; another`, wantSent: []bool{false}},
		{name: "the real apply passes", opts: []client.PatchOption{client.ForceOwnership, client.FieldOwner("gradual")}, wantSent: []bool{true}},
		{name: "the legacy manager's fields are taken over", applier: mine, conflict: conflictError(`conflict with "gradual"`), opts: apply,
			wantSent: []bool{false, true}},
		{name: "another rollout's fields are refused", applier: mine, conflict: conflictError(`conflict with "gradual"`, `conflict with "gradual/rollout/team-b/web"`),
			opts: apply, wantErr: `ConfigMap demo/cfg: server-side apply conflict: .data.k1 owned by rollout team-b/web; another rollout`, wantSent: []bool{false}},
		{name: "another rollout's fields are refused when forcing", applier: forcing, conflict: conflictError(`conflict with "flux"`, `conflict with "gradual/rollout/team-b/web"`),
			opts: apply, wantErr: `ConfigMap demo/cfg: server-side apply conflict: .data.k1 owned by rollout team-b/web; another rollout`, wantSent: []bool{false}},
		{name: "forcing takes other appliers' fields", applier: forcing, conflict: conflictError(`conflict with "flux"`), opts: apply, wantSent: []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent []bool
			inner := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					po := (&client.PatchOptions{}).ApplyOptions(opts)
					force := po.Force != nil && *po.Force
					sent = append(sent, force)
					if !force && tc.conflict != nil {
						return tc.conflict
					}
					return nil
				},
			})
			o := obj("v1", "ConfigMap", "demo", "cfg")
			applier := cmp.Or(tc.applier, a)
			err := applier.vetConflicts(t.Context(), inner, o, client.Apply, tc.opts...)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			var ce *ConflictError
			if tc.wantErr != "" && !errors.As(err, &ce) {
				t.Errorf("err is %T, want *ConflictError", err)
			}
			if !reflect.DeepEqual(sent, tc.wantSent) {
				t.Errorf("patches sent with force = %v, want %v", sent, tc.wantSent)
			}
		})
	}
}

func TestStatusOf(t *testing.T) {
	deployment := func(conditions ...any) *unstructured.Unstructured {
		u := obj("apps/v1", "Deployment", "demo", "web")
		u.SetGeneration(2)
		u.Object["spec"] = map[string]any{"replicas": int64(2), "progressDeadlineSeconds": int64(10)}
		u.Object["status"] = map[string]any{
			"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(2),
			"availableReplicas": int64(0), "conditions": conditions,
		}
		return u
	}
	failed := statusOf(deployment(map[string]any{
		"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
		"message": `ReplicaSet "web-5d8" has timed out progressing.`,
	}))
	if want := (ObjectStatus{Object: web, Status: "Failed", Message: `ProgressDeadlineExceeded: ReplicaSet "web-5d8" has timed out progressing.`}); failed != want {
		t.Errorf("statusOf(deadline exceeded) = %+v, want %+v", failed, want)
	}
	progressing := statusOf(deployment())
	if progressing.Status != "InProgress" || progressing.Message != "Available: 0/2" {
		t.Errorf("statusOf(unavailable) = %+v, want InProgress, Available: 0/2", progressing)
	}
}

func TestChangedFields(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "resourceVersion": "7", "labels": map[string]any{"app.kubernetes.io/name": "web", "extra": "x"}},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "busybox:2"}},
		}}},
		"status": map[string]any{"replicas": int64(3)},
	}}
	merged := live.DeepCopy()
	merged.SetResourceVersion("8")
	merged.SetLabels(map[string]string{"app.kubernetes.io/name": "web2", "extra": "x"})
	merged.Object["spec"].(map[string]any)["replicas"] = int64(2)
	merged.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "busybox:1"
	merged.Object["status"] = map[string]any{"replicas": int64(2)}
	got := changedFields(live, merged)
	want := []string{`.metadata.labels["app.kubernetes.io/name"]`, ".spec.replicas", ".spec.template.spec.containers[0].image"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changedFields = %q, want %q", got, want)
	}
}

func TestDefinedKinds(t *testing.T) {
	crd := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com")
	crd.Object["spec"] = map[string]any{
		"group": "example.com", "scope": "Namespaced", "names": map[string]any{"kind": "Widget", "plural": "widgets"},
		"versions": []any{
			map[string]any{"name": "v1", "served": true, "storage": true},
			map[string]any{"name": "v1alpha1", "served": false},
		},
	}
	cluster := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets.example.com")
	cluster.Object["spec"] = map[string]any{
		"group": "example.com", "scope": "Cluster", "names": map[string]any{"kind": "Gadget"},
		"versions": []any{map[string]any{"name": "v2", "served": true}},
	}
	got := definedKinds([]*unstructured.Unstructured{crd, cluster, obj("v1", "ConfigMap", "demo", "x")})
	want := map[schema.GroupVersionKind]bool{
		{Group: "example.com", Version: "v1", Kind: "Widget"}: true,
		{Group: "example.com", Version: "v2", Kind: "Gadget"}: false,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("definedKinds = %v, want %v", got, want)
	}
}
