package fleetresource

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

func TestMaxUnsettled(t *testing.T) {
	if l, err := MaxUnsettled(types.StringNull()); err != nil || l.Resolve(10) != 0 {
		t.Errorf("null max_unsettled = %+v, %v; want 0 of any number of clusters", l, err)
	}
	if l, err := MaxUnsettled(types.StringValue("50%")); err != nil || l.Resolve(10) != 5 {
		t.Errorf("max_unsettled 50%% of 10 = %v, %v; want 5", l.Resolve(10), err)
	}
	if _, err := MaxUnsettled(types.StringValue("-1")); err == nil {
		t.Error("max_unsettled -1 accepted")
	}
}

func TestSortedNames(t *testing.T) {
	if l := SortedNames(nil); l.IsNull() || len(l.Elements()) != 0 {
		t.Errorf("no names: %s, want an empty list, never null", l)
	}
	if got := SortedNames([]string{"b", "a"}).String(); got != `["a","b"]` {
		t.Errorf("SortedNames = %s", got)
	}
}

func TestImportHint(t *testing.T) {
	hint := ImportHint("gradual_rollout", records.Key{Kind: "rollout", Namespace: "fleet", Name: "web"})
	for _, want := range []string{"terraform import gradual_rollout.<name> fleet/web", "to = gradual_rollout.<name>", `id = "fleet/web"`} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint %q lacks %q", hint, want)
		}
	}
}
