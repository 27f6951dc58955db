package rollout

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

func TestDeletionCountsObjectsOnClustersThatRunARevision(t *testing.T) {
	m := Model{
		Name: types.StringValue("web"), Namespace: types.StringValue("fleet"), DeletionPolicy: types.StringValue("delete"),
		Manifests:        manifesttype.NewValue("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: a}\n"),
		SensitiveObjects: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("/Secret a/db")}),
		private: privateState{Clusters: map[string]clusterRecord{
			"one":   {Revision: "r1", State: "current"},
			"two":   {Revision: "r1", State: "drifted"},
			"fresh": {State: "pending"}, // nothing applied there: nothing to delete
		}},
	}
	d := m.deletion("")
	if d.Objects != 6 || d.Clusters != 2 || d.Orphan {
		t.Fatalf("deletion = %+v, want 3 objects (2 + 1 sensitive) on each of 2 clusters = 6", d)
	}
	var diags diag.Diagnostics
	fleetresource.WarnDeletion(&diags, d)
	if len(diags) != 1 || !strings.Contains(diags[0].Detail(), "will delete 6 object(s) from 2 cluster(s)") || !strings.Contains(diags[0].Detail(), `deletion_policy = "delete"`) {
		t.Fatalf("warning: %v", diags)
	}
	m.DeletionPolicy = types.StringValue("orphan")
	diags = nil
	fleetresource.WarnDeletion(&diags, m.deletion("name"))
	if !strings.Contains(diags[0].Summary(), "Replacement") || !strings.Contains(diags[0].Detail(), "Changing name replaces rollout fleet/web") ||
		!strings.Contains(diags[0].Detail(), "leave its 6 object(s) in 2 cluster(s)") {
		t.Fatalf("warning: %s: %s", diags[0].Summary(), diags[0].Detail())
	}
}

func TestIdentityChangeNamesWhatForcesTheReplacement(t *testing.T) {
	prior := Model{Name: types.StringValue("a"), Namespace: types.StringValue("fleet"), RecordNamespace: types.StringValue("gradual-system")}
	same := prior
	if got := identityChange(&same, &prior); got != "" {
		t.Fatalf("no change, yet %q", got)
	}
	plan := prior
	plan.Name, plan.RecordNamespace = types.StringValue("b"), types.StringValue("other")
	if got := identityChange(&plan, &prior); got != "name, record_namespace" {
		t.Fatalf("got %q", got)
	}
	plan = prior
	plan.Name = types.StringUnknown() // not known yet: no claim either way
	if got := identityChange(&plan, &prior); got != "" {
		t.Fatalf("unknown name reported as %q", got)
	}
}
