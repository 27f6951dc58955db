package assignment

import (
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

func names(ms []Module) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return strings.Join(out, ",")
}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		modules []Module
		want    string
		wantErr string
	}{
		{"configured order kept", []Module{{Name: "a"}, {Name: "b"}}, "a,b", ""},
		{"dependency first", []Module{{Name: "app", DependsOn: []string{"crds"}}, {Name: "crds"}, {Name: "x"}}, "crds,app,x", ""},
		{"chain", []Module{{Name: "c", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"a"}}, {Name: "a"}}, "a,b,c", ""},
		{"cycle", []Module{{Name: "a", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"a"}}}, "", "cycle: a → b → a"},
		{"self", []Module{{Name: "a", DependsOn: []string{"a"}}}, "", `"a" depends on itself`},
		{"duplicate", []Module{{Name: "a"}, {Name: "a"}}, "", `"a" is used more than once`},
		{"unknown", []Module{{Name: "a", DependsOn: []string{"zz"}}}, "", `depends on "zz"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Order(tc.modules)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || names(got) != tc.want {
				t.Fatalf("Order = %s, %v; want %s", names(got), err, tc.want)
			}
		})
	}
}

func TestPlanAssignment(t *testing.T) {
	spec := Spec{Modules: []Module{{Name: "cni", Revision: "r2"}}}
	applied := func(rev string) []records.ModuleBinding {
		return []records.ModuleBinding{{Module: "cni", Revision: rev, Result: records.BindingApplied}}
	}
	obs := &Observation{
		Eligible: []string{"bound-old", "bound-new", "failed", "joined"},
		Skipped:  map[string]string{"down": "not ready"},
		Bindings: map[string][]records.ModuleBinding{
			"bound-old": applied("r1"), "bound-new": applied("r2"), "down": applied("r1"), "left": applied("r1"), "deleted": applied("r1"),
			"failed": {{Module: "cni", Revision: "r2", Result: records.BindingFailed}},
		},
		Modules: map[string]*delivery.Observation{"cni": {Clusters: map[string]delivery.ClusterState{
			"bound-old": {Revision: "r1", State: delivery.StateCurrent},
			"bound-new": {Revision: "r2", State: delivery.StateCurrent},
		}}},
		Leaving: []string{"left"}, Gone: []string{"deleted"},
	}

	spec.Mode = ApplyOnce
	p := PlanAssignment(obs, spec, nil)
	if got := strings.Join(p.Apply["cni"], ","); got != "failed,joined" {
		t.Errorf("ApplyOnce applies to %s, want failed,joined", got)
	}
	if got := strings.Join(p.KeptOld["cni"], ","); got != "bound-old" {
		t.Errorf("ApplyOnce keeps old on %s, want bound-old", got)
	}
	if p.Bindings["bound-old"][0].Revision != "r1" || p.Bindings["bound-old"][0].Changes {
		t.Errorf("bound-old planned %+v", p.Bindings["bound-old"])
	}
	if _, ok := p.Bindings["left"]; ok {
		t.Error("a leaving cluster keeps its binding in the plan")
	}
	if p.Bindings["down"][0].Revision != "r1" {
		t.Errorf("a skipped cluster's binding should stay: %+v", p.Bindings["down"])
	}
	if !strings.Contains(KeptOldWarning(p, spec), "1 cluster(s) keep an older version") {
		t.Errorf("warning: %s", KeptOldWarning(p, spec))
	}

	spec.Mode = Reconcile
	p = PlanAssignment(obs, spec, map[string]map[string]bool{"bound-new": {"cni": true}})
	if got := strings.Join(p.Apply["cni"], ","); got != "bound-old,bound-new,failed,joined" {
		t.Errorf("Reconcile applies to %s", got)
	}
	p = PlanAssignment(obs, spec, nil)
	if got := strings.Join(p.Apply["cni"], ","); got != "bound-old,failed,joined" {
		t.Errorf("Reconcile without drift applies to %s", got)
	}
	if len(p.KeptOld) != 0 {
		t.Errorf("Reconcile keeps nothing old: %v", p.KeptOld)
	}
}

func TestPlanAssignment_removedModule(t *testing.T) {
	spec := Spec{Mode: Reconcile, Modules: []Module{{Name: "a", Revision: "r"}}}
	obs := &Observation{
		Eligible: []string{"c1"},
		Bindings: map[string][]records.ModuleBinding{"c1": {{Module: "a", Revision: "r", Result: records.BindingApplied}, {Module: "old", Revision: "x", Result: records.BindingApplied}}},
		Modules:  map[string]*delivery.Observation{"a": {Clusters: map[string]delivery.ClusterState{"c1": {Revision: "r", State: delivery.StateCurrent}}}},
	}
	p := PlanAssignment(obs, spec, nil)
	if strings.Join(p.Removed["old"], ",") != "c1" || len(p.Apply) != 0 || len(p.Bindings["c1"]) != 1 {
		t.Fatalf("plan: %+v", p)
	}
}

func TestDescribe(t *testing.T) {
	spec := Spec{Key: records.Key{Kind: KeyKind, Namespace: "fleet", Name: "cni"}}
	if got := spec.ModuleKey("calico").Describe(); got != "module-assignment fleet/cni (module calico)" {
		t.Fatal(got)
	}
}
