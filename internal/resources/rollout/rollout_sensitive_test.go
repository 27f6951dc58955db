package rollout

import (
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// A CRD of `manifests` that defines a cluster-scoped kind keeps that kind's objects of
// `sensitive_manifests` without a namespace, in sensitive_objects as where they are applied; and
// `objects` shows the public half only.
func TestSensitiveObjectsClusterScopedByThePublicHalf(t *testing.T) {
	ctx := context.Background()
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: vaults.example.com}\n" +
		"spec: {group: example.com, scope: Cluster, names: {kind: Vault, plural: vaults}}\n"
	hidden := "apiVersion: example.com/v1\nkind: Vault\nmetadata: {name: v}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: x}\n"
	m := Model{Manifests: manifesttype.NewValue(crd), Sensitive: types.StringValue(hidden), DefaultNamespace: types.StringValue("app")}
	if diags := m.setSensitiveObjects(ctx); diags.HasError() {
		t.Fatal(diags)
	}
	var objects []string
	if diags := m.SensitiveObjects.ElementsAs(ctx, &objects, false); diags.HasError() {
		t.Fatal(diags)
	}
	if !slices.Equal(objects, []string{"/Secret app/s", "example.com/Vault /v"}) {
		t.Errorf("sensitive_objects = %q", objects)
	}
	set, err := m.bundle()
	if err != nil {
		t.Fatal(err)
	}
	if diags := m.setObjects(ctx, set); diags.HasError() {
		t.Fatal(diags)
	}
	shown := m.Objects.Elements()
	if _, ok := shown["apiextensions.k8s.io/CustomResourceDefinition /vaults.example.com"]; !ok || len(shown) != 1 {
		t.Errorf("objects = %v, want the CRD only (the sensitive half is never shown)", shown)
	}
}
