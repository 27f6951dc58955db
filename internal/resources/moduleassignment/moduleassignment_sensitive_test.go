package moduleassignment

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

const dbConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db, namespace: app}\ndata: {password: hunter2-db}\n"

// sensitiveModel is an assignment of one module "db" whose manifests and sensitive half are given.
func sensitiveModel(t *testing.T, public, hidden string, rules []ignoreattr.Rule) *Model {
	t.Helper()
	return moduleModel(t, public, hidden, "", rules)
}

// moduleModel is an assignment of one module "db" whose manifests, sensitive half and
// default_namespace ("" for none) are given.
func moduleModel(t *testing.T, public, hidden, defaultNamespace string, rules []ignoreattr.Rule) *Model {
	t.Helper()
	ctx := context.Background()
	ns := types.StringNull()
	if defaultNamespace != "" {
		ns = types.StringValue(defaultNamespace)
	}
	mod := types.ObjectValueMust(moduleAttrTypes, map[string]attr.Value{
		"name": types.StringValue("db"), "version": types.StringValue("1"), "manifests": manifesttype.NewValue(public),
		"sensitive_manifests": types.StringNull(), "depends_on": types.ListNull(types.StringType), "default_namespace": ns,
	})
	paths, diags := ignoreattr.Value(ctx, rules)
	if diags.HasError() {
		t.Fatal(diags)
	}
	return &Model{
		Namespace: types.StringValue("fleet"), Name: types.StringValue("a"), Mode: types.StringValue("reconcile"),
		Modules:        types.ListValueMust(types.ObjectType{AttrTypes: moduleAttrTypes}, []attr.Value{mod}),
		IgnoreFields:   types.ListNull(types.ObjectType{AttrTypes: ignoreattr.AttrTypes}),
		SensitivePaths: paths, UpdateLimit: types.StringValue("1"), MaxFailures: types.StringValue("0"),
		Verify:    types.ObjectNull(verifyAttrTypes),
		sensitive: map[string]string{"db": hidden},
	}
}

func TestSpecRefusesSensitiveFieldsInAModulesManifests(t *testing.T) {
	rules := []ignoreattr.Rule{{Kind: "ConfigMap", Name: "db", Paths: []string{".data.password"}}}
	_, diags := sensitiveModel(t, dbConfigMap, "", rules).spec(context.Background())
	if !diags.HasError() {
		t.Fatal("a sensitive field in a module's manifests was accepted")
	}
	var text string
	for _, d := range diags.Errors() {
		text += d.Summary() + ": " + d.Detail()
	}
	if !strings.Contains(text, "Sensitive Fields In Manifests") || !strings.Contains(text, "module db") ||
		!strings.Contains(text, "ConfigMap app/db .data.password") || strings.Contains(text, "hunter2") {
		t.Errorf("diagnostics: %s", text)
	}

	// In the sensitive half: accepted, its value kept for redaction, and the rules name the revision.
	public := "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n"
	spec, diags := sensitiveModel(t, public, dbConfigMap, rules).spec(context.Background())
	if diags.HasError() {
		t.Fatal(diags)
	}
	if got := spec.Modules[0].Redact; !slices.Equal(got, []string{"aHVudGVyMi1kYg==", "hunter2-db"}) {
		t.Errorf("Redact = %q", got)
	}
	without, diags := sensitiveModel(t, public, dbConfigMap, nil).spec(context.Background())
	if diags.HasError() {
		t.Fatal(diags)
	}
	if spec.Modules[0].Revision == without.Modules[0].Revision {
		t.Error("sensitive_paths do not change the module's revision")
	}
}
