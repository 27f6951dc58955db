package moduleassignment

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// The config record keeps names and the change attributes, so that an import (and the status
// data source, which reads the record) picks the same clusters and changes them the same way;
// a record written before they existed reads as a selector and the defaults.
func TestConfigRecordKeepsNamesAndChangeAttributes(t *testing.T) {
	ctx := context.Background()
	m := moduleModel(t, rendered, "", "app", nil)
	m.Selector = types.ObjectNull(fleetresource.SelectorAttrTypes)
	m.Names = types.ListValueMust(types.StringType, []attr.Value{types.StringValue("c2"), types.StringValue("c1")})
	m.Canary = types.ListValueMust(types.StringType, []attr.Value{types.StringValue("c2")})
	m.CanaryOptional, m.ForceConflicts, m.RetryInvalid = types.BoolValue(true), types.BoolValue(true), types.BoolValue(true)
	m.OnFailure = types.StringValue("rollback")
	raw, diags := m.configRecord(ctx)
	if diags.HasError() {
		t.Fatal(errorText(diags))
	}
	var back Model
	if diags := back.fromConfigRecord(ctx, raw); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if !back.Selector.IsNull() || !back.Names.Equal(m.Names) || !back.Canary.Equal(m.Canary) || !back.OnFailure.Equal(m.OnFailure) ||
		!back.CanaryOptional.ValueBool() || !back.ForceConflicts.ValueBool() || !back.RetryInvalid.ValueBool() {
		t.Errorf("after the record: selector %v names %v canary %v on_failure %v optional %v force %v retry %v", back.Selector, back.Names,
			back.Canary, back.OnFailure, back.CanaryOptional, back.ForceConflicts, back.RetryInvalid)
	}
	q, diags := back.query(ctx, nil)
	if diags.HasError() || !slices.Equal(q.Names, []string{"c2", "c1"}) {
		t.Errorf("query %+v %v: want the names", q, diags)
	}
	spec, diags := back.spec(ctx)
	if diags.HasError() || !spec.ForceConflicts || !spec.Retry || spec.Policy.OnFailure != engine.Rollback ||
		!slices.Equal(spec.Policy.Canary, []string{"c2"}) || !spec.Policy.CanaryOptional {
		t.Errorf("spec %+v %v", spec, diags)
	}

	old := `{"selector":{"matchLabels":{"env":"prod"}},"modules":[],"mode":"Reconcile","updateLimit":"1","maxFailures":"0","verifyTimeout":"5m","bakeTime":"0s","deletionPolicy":"delete"}`
	var older Model
	if diags := older.fromConfigRecord(ctx, []byte(old)); diags.HasError() {
		t.Fatal(errorText(diags))
	}
	if older.Selector.IsNull() || !older.Names.IsNull() || !older.Canary.IsNull() || older.OnFailure.ValueString() != "halt" ||
		older.CanaryOptional.ValueBool() || older.ForceConflicts.ValueBool() || older.RetryInvalid.ValueBool() {
		t.Errorf("an older record: selector %v names %v canary %v on_failure %v", older.Selector, older.Names, older.Canary, older.OnFailure)
	}
	if raw, _ := moduleModel(t, rendered, "", "", nil).configRecord(ctx); strings.Contains(string(raw), "names") ||
		strings.Contains(string(raw), "onFailure") || strings.Contains(string(raw), "canary") {
		t.Errorf("defaults are recorded: %s", raw)
	}
}
