package moduleassignment

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// `values` makes the modules templates: the rules name every module's revision, a name that
// cannot be a variable is refused against the attribute, and the config record keeps them for
// import and the status data source.
func TestSpecValues(t *testing.T) {
	ctx := context.Background()
	const template = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: zone, namespace: demo}\ndata: {zone: \"${zone}\"}\n"
	plain, diags := moduleModel(t, template, "", "", nil).spec(ctx)
	if diags.HasError() || plain.Values != nil {
		t.Fatalf("without values: %v %+v", errorText(diags), plain.Values)
	}

	values := &delivery.Values{FromLabels: map[string]string{"zone": "example.com/zone"}, Clusters: map[string]map[string]string{"c1": {"tier": "gold"}}}
	m := moduleModel(t, template, "", "", nil)
	m.Values, diags = fleetresource.ValuesValue(ctx, values)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	spec, diags := m.spec(ctx)
	if diags.HasError() || !reflect.DeepEqual(spec.Values, values) {
		t.Fatalf("with values: %v %+v", errorText(diags), spec.Values)
	}
	if spec.Modules[0].Revision == plain.Modules[0].Revision {
		t.Error("the values rules do not name the module's revision")
	}
	raw, diags := m.configRecord(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	var back Model
	if diags := back.fromConfigRecord(ctx, raw); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if !back.Values.Equal(m.Values) {
		t.Errorf("after the record: values %v, want %v", back.Values, m.Values)
	}

	m.Values, _ = fleetresource.ValuesValue(ctx, &delivery.Values{Clusters: map[string]map[string]string{"c1": {"cluster_name": "x", "not-a-name": "y"}}})
	_, diags = m.spec(ctx)
	text := errorText(diags)
	if !strings.Contains(text, "Invalid Values") || !strings.Contains(text, `"cluster_name" is set from the Cluster itself`) || !strings.Contains(text, `"not-a-name" is not a variable name`) {
		t.Errorf("bad names: %s", text)
	}
}
