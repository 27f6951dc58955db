package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

func stageValue(name string, names []string, labels map[string]string, limit, failures, bake string) attr.Value {
	ctx := context.Background()
	opt := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	l := types.MapNull(types.StringType)
	if labels != nil {
		l, _ = types.MapValueFrom(ctx, types.StringType, labels)
	}
	return types.ObjectValueMust(stageAttrTypes, map[string]attr.Value{
		"name": types.StringValue(name), "names": stringListOrNull(ctx, names), "match_labels": l,
		"update_limit": opt(limit), "max_failures": opt(failures), "bake_time": opt(bake),
	})
}

func TestModelStages(t *testing.T) {
	ctx := context.Background()
	list := func(vals ...attr.Value) types.List {
		return types.ListValueMust(types.ObjectType{AttrTypes: stageAttrTypes}, vals)
	}
	base := func() delivery.Spec {
		var s delivery.Spec
		s.Policy.UpdateLimit, _ = engine.ParseLimit("3")
		s.Policy.MaxFailures, _ = engine.ParseMaxFailures("1")
		s.Policy.BakeTime = time.Minute
		return s
	}
	t.Run("limits default to the rollout's; stored and restored for import", func(t *testing.T) {
		m := Model{Stages: list(stageValue("eu", nil, map[string]string{"region": "eu"}, "25%", "0", "10m"), stageValue("us", []string{"prod-us-1"}, nil, "", "", "")),
			PromoteUntil: types.StringValue("eu")}
		spec := base()
		if diags := m.stages(ctx, &spec); diags.HasError() {
			t.Fatal(diags)
		}
		eu, us := spec.Stages[0], spec.Stages[1]
		if eu.UpdateLimit.String() != "25%" || eu.MaxFailures.String() != "0" || eu.BakeTime != 10*time.Minute || eu.MatchLabels["region"] != "eu" {
			t.Errorf("eu %+v", eu)
		}
		if us.UpdateLimit.String() != "3" || us.MaxFailures.String() != "1" || us.BakeTime != time.Minute || us.Names[0] != "prod-us-1" {
			t.Errorf("us %+v", us)
		}
		if spec.Policy.PromoteUntil != "eu" {
			t.Errorf("promote_until %q", spec.Policy.PromoteUntil)
		}
		stored, diags := m.storedStages(ctx)
		if diags.HasError() {
			t.Fatal(diags)
		}
		if back := stagesValue(ctx, stored); !back.Equal(m.Stages) {
			t.Errorf("import restores %v, want %v", back, m.Stages)
		}
	})
	for _, tc := range []struct {
		name string
		m    Model
		want string
	}{
		{"promote_until without stages", Model{Stages: types.ListNull(types.ObjectType{AttrTypes: stageAttrTypes}), PromoteUntil: types.StringValue("eu")}, "the rollout has no `stages`"},
		{"promote_until naming no stage", Model{Stages: list(stageValue("eu", []string{"a"}, nil, "", "", "")), PromoteUntil: types.StringValue("ap")}, `promote_until = "ap" names no stage`},
		{"a stage named twice", Model{Stages: list(stageValue("eu", []string{"a"}, nil, "", "", ""), stageValue("eu", []string{"b"}, nil, "", "", ""))}, "Stage Named Twice"},
		{"a stage picking nothing", Model{Stages: list(stageValue("eu", nil, nil, "", "", ""))}, "has neither `names` nor `match_labels`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := base()
			diags := tc.m.stages(ctx, &spec)
			var text []string
			for _, d := range diags.Errors() {
				text = append(text, d.Summary()+": "+d.Detail())
			}
			if !strings.Contains(strings.Join(text, "\n"), tc.want) {
				t.Errorf("diagnostics %q, want %q", text, tc.want)
			}
		})
	}
}
