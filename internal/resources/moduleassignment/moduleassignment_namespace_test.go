package moduleassignment

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
)

// written is a module as written with its namespace; rendered is the same without it, as
// `helm template` gives it. The ClusterRole has no namespace in either.
const (
	written = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: app}\ndata: {setting: a}\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules: []\n"
	rendered = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {setting: a}\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules: []\n"
)

func errorText(diags diag.Diagnostics) string {
	var text string
	for _, d := range diags.Errors() {
		text += d.Summary() + ": " + d.Detail() + "\n"
	}
	return text
}

// With default_namespace, the objects without a namespace carry it (cluster-scoped ones stay
// without), so the module's revision is that of the same objects written with the namespace.
func TestSpecDefaultNamespaceNamesTheWrittenRevision(t *testing.T) {
	ctx := context.Background()
	want, err := manifest.Revision(written)
	if err != nil {
		t.Fatal(err)
	}
	spec, diags := moduleModel(t, rendered, "", "app", nil).spec(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	mod := spec.Modules[0]
	if mod.Revision != want {
		t.Errorf("revision with default_namespace = %s, want the written form's %s", mod.Revision, want)
	}
	if got := mod.Objects.Keys(); !slices.Equal(got, []string{"/ConfigMap app/settings", "rbac.authorization.k8s.io/ClusterRole /reader"}) {
		t.Errorf("objects = %q", got)
	}
	writtenSpec, diags := moduleModel(t, written, "", "", nil).spec(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if writtenSpec.Modules[0].Revision != want {
		t.Errorf("the written form's revision = %s, want %s", writtenSpec.Modules[0].Revision, want)
	}
	// A namespace that names nothing new leaves the revision as it was.
	same, diags := moduleModel(t, written, "", "app", nil).spec(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if same.Modules[0].Revision != want {
		t.Errorf("written form with default_namespace: revision %s, want %s", same.Modules[0].Revision, want)
	}
	// Without it the rendered objects are others (the ConfigMap has no namespace).
	without, diags := moduleModel(t, rendered, "", "", nil).spec(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if without.Modules[0].Revision == want {
		t.Error("the rendered module without default_namespace names the written form's revision")
	}
}

// Two objects that become one once the default namespace is set are refused, naming the object.
func TestSpecDefaultNamespaceRefusesAClash(t *testing.T) {
	twice := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: app}\n"
	_, diags := moduleModel(t, twice, "", "app", nil).spec(context.Background())
	if text := errorText(diags); !strings.Contains(text, "Invalid Manifests") || !strings.Contains(text, "/ConfigMap app/settings is defined twice") {
		t.Errorf("diagnostics: %q", text)
	}
}

// sensitive_paths rules match the objects as applied: a rule naming the default namespace finds
// a public object written without one (refused), and the values of a sensitive object written
// without one (redacted); sensitive_objects names it in the namespace it is applied to.
func TestSpecSensitivePathsMatchDefaultedObjects(t *testing.T) {
	ctx := context.Background()
	rules := []ignoreattr.Rule{{Kind: "ConfigMap", Namespace: "app", Name: "db", Paths: []string{".data.password"}}}
	db := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {password: hunter2-db}\n"

	_, diags := moduleModel(t, db, "", "app", rules).spec(ctx)
	text := errorText(diags)
	if !strings.Contains(text, "Sensitive Fields In Manifests") || !strings.Contains(text, "ConfigMap app/db .data.password") || strings.Contains(text, "hunter2") {
		t.Errorf("a sensitive field of a defaulted object in manifests: diagnostics %q", text)
	}

	public := "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n"
	m := moduleModel(t, public, db, "app", rules)
	spec, diags := m.spec(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if got := spec.Modules[0].Redact; !slices.Equal(got, []string{"aHVudGVyMi1kYg==", "hunter2-db"}) {
		t.Errorf("Redact = %q", got)
	}
	if diags := m.setSensitiveObjects(ctx); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	var objects map[string][]string
	if diags := m.SensitiveObjects.ElementsAs(ctx, &objects, false); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if got := objects["db"]; !slices.Equal(got, []string{"/ConfigMap app/db"}) {
		t.Errorf("sensitive_objects[db] = %q", got)
	}
}

// A CRD of the public half that defines a cluster-scoped kind keeps that kind's objects of the
// sensitive half without a namespace, in sensitive_objects as where they are applied.
func TestSensitiveObjectsClusterScopedByThePublicHalf(t *testing.T) {
	ctx := context.Background()
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: vaults.example.com}\n" +
		"spec: {group: example.com, scope: Cluster, names: {kind: Vault, plural: vaults}}\n"
	hidden := "apiVersion: example.com/v1\nkind: Vault\nmetadata: {name: v}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: x}\n"
	m := moduleModel(t, crd, hidden, "app", nil)
	if diags := m.setSensitiveObjects(ctx); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	var objects map[string][]string
	if diags := m.SensitiveObjects.ElementsAs(ctx, &objects, false); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if got := objects["db"]; !slices.Equal(got, []string{"/Secret app/s", "example.com/Vault /v"}) {
		t.Errorf("sensitive_objects[db] = %q", got)
	}
}

// The config record keeps default_namespace, so an import restores it; records without one read
// back as unset.
func TestConfigRecordKeepsDefaultNamespace(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"app", ""} {
		m := moduleModel(t, rendered, "", ns, nil)
		raw, diags := m.configRecord(ctx)
		if diags.HasError() {
			t.Fatal(errorText(diags))
		}
		if ns == "" && strings.Contains(string(raw), "defaultNamespace") {
			t.Errorf("an unset default_namespace is recorded: %s", raw)
		}
		var back Model
		if diags := back.fromConfigRecord(ctx, raw); diags.HasError() {
			t.Fatal(errorText(diags))
		}
		if !back.Modules.Equal(m.Modules) {
			t.Errorf("default_namespace %q: modules after the record\n  %v\nwant\n  %v", ns, back.Modules, m.Modules)
		}
	}
}
