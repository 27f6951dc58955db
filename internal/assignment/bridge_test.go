package assignment

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

func TestVerified(t *testing.T) {
	b := map[string][]records.ModuleBinding{
		"a": {{Module: "cni", Revision: "r2", Result: records.BindingApplied}},
		"b": {{Module: "cni", Revision: "r1", Result: records.BindingApplied}},
	}
	if !Verified(b, "cni", "r2") {
		t.Error("a cluster applied and verified r2")
	}
	if Verified(b, "cni", "r3") || Verified(b, "csi", "r2") {
		t.Error("nothing holds r3, nor csi")
	}
	b["c"] = []records.ModuleBinding{{Module: "cni", Revision: "r2", Result: records.BindingFailed}}
	if Verified(b, "cni", "r2") {
		t.Error("a cluster was restored from r2: not verified")
	}
}

func TestCheckBridge(t *testing.T) {
	mod := func(name, yaml string) Module {
		set, err := manifest.Parse(yaml)
		if err != nil {
			t.Fatal(err)
		}
		return Module{Name: name, Objects: set, Revision: "r"}
	}
	cm := mod("cfg", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n")
	key := records.Key{Kind: KeyKind, Namespace: "fleet", Name: "a"}
	prod := fleet.Query{Namespace: "fleet", Selector: labels.SelectorFromSet(labels.Set{"env": "prod"})}
	on := &FollowJoins{}
	cases := []struct {
		name string
		spec Spec
		q    fleet.Query
		want string
	}{
		{"off", Spec{Key: key, Modules: []Module{cm}}, fleet.Query{Names: []string{"x"}}, ""},
		{"bridgeable", Spec{Key: key, Modules: []Module{cm}, FollowJoins: on}, prod, ""},
		{"names", Spec{Key: key, Modules: []Module{cm}, FollowJoins: on}, fleet.Query{Names: []string{"x"}}, "by label only"},
		{"empty selector", Spec{Key: key, Modules: []Module{cm}, FollowJoins: on}, fleet.Query{Selector: labels.Everything()}, "needs a `selector`"},
		{"values", Spec{Key: key, Modules: []Module{cm}, FollowJoins: on, Values: &delivery.Values{}}, prod, "cannot render for a joiner"},
		{"secret", Spec{Key: key, Modules: []Module{mod("s", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n")}, FollowJoins: on}, prod, "in the clear"},
		{"too big", Spec{Key: key, Modules: []Module{mod("big", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: {k: "+strings.Repeat("x", 1<<20)+"}\n")}, FollowJoins: on}, prod, "over Kubernetes' limit of 1048576 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBridge(tc.spec, tc.q)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}
