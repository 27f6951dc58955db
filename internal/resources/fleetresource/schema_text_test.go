package fleetresource

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestNamesRefuseAnEmptyListButNotNull(t *testing.T) {
	run := func(v types.List) string {
		var out []string
		for _, val := range namesValidators() {
			resp := &validator.ListResponse{}
			val.ValidateList(context.Background(), validator.ListRequest{Path: path.Root("clusters"), ConfigValue: v}, resp)
			for _, d := range resp.Diagnostics.Errors() {
				out = append(out, d.Summary()+": "+d.Detail())
			}
		}
		return strings.Join(out, "\n")
	}
	if got := run(types.ListValueMust(types.StringType, []attr.Value{})); !strings.Contains(got, "No Clusters Listed") || !strings.Contains(got, "every Cluster") {
		t.Fatalf("empty list: %q", got)
	}
	for name, v := range map[string]types.List{
		"null":    types.ListNull(types.StringType),
		"unknown": types.ListUnknown(types.StringType),
		"one":     types.ListValueMust(types.StringType, []attr.Value{types.StringValue("a")}),
	} {
		if got := run(v); got != "" {
			t.Fatalf("%s refused: %s", name, got)
		}
	}
}
