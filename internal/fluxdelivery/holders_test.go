package fluxdelivery

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestHoldersReadsOtherKustomizationsInventories: the objects other Kustomizations applied to a
// cluster are read from their inventories, with who applied them (this provider's key, or the
// Kustomization's name); the rollout's own Kustomizations, those of other clusters and those
// applying to the management cluster itself are no claim.
func TestHoldersReadsOtherKustomizationsInventories(t *testing.T) {
	self := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	other := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "api"}
	ks := func(name, secret string, key *records.Key, ids ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(KustomizationKind)
		u.SetNamespace("fleet")
		u.SetName(name)
		if key != nil {
			u.SetLabels(map[string]string{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: key.Hash()})
			u.SetAnnotations(map[string]string{records.AnnotationRolloutKey: key.String()})
		}
		if secret != "" {
			_ = unstructured.SetNestedField(u.Object, secret, "spec", "kubeConfig", "secretRef", "name")
		}
		var entries []any
		for _, id := range ids {
			entries = append(entries, map[string]any{"id": id, "v": "v1"})
		}
		_ = unstructured.SetNestedSlice(u.Object, entries, "status", "inventory", "entries")
		return u
	}
	mgmt := fake.NewClientBuilder().WithObjects(
		ks("web-c1", "c1-kubeconfig", &self, "app_settings__ConfigMap"),
		ks("api-c1", "c1-kubeconfig", &other, "app_settings__ConfigMap", "_app__Namespace"),
		ks("platform", "c1-kubeconfig", nil, "kube-system_coredns_apps_Deployment"),
		ks("api-c2", "c2-kubeconfig", &other, "app_settings__ConfigMap"),
		ks("local", "", nil, "app_other__ConfigMap"),
	).Build()
	got, err := Holders(context.Background(), mgmt, "fleet", self, []string{"c1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[manifest.Identity]Holder{
		{Namespace: "app", Name: "settings", Kind: "ConfigMap"}:                        {Key: other, Kustomization: "fleet/api-c1"},
		{Name: "app", Kind: "Namespace"}:                                               {Key: other, Kustomization: "fleet/api-c1"},
		{Namespace: "kube-system", Name: "coredns", Group: "apps", Kind: "Deployment"}: {Kustomization: "fleet/platform"},
	}
	if len(got) != 1 || len(got["c1"]) != len(want) {
		t.Fatalf("holders %v, want c1 only with %v", got, want)
	}
	for id, h := range want {
		if got["c1"][id] != h {
			t.Errorf("%v held by %+v, want %+v", id, got["c1"][id], h)
		}
	}
}
