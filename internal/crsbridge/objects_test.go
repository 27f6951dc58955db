package crsbridge

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

func TestClusterResourceSetListsModulesInOrder(t *testing.T) {
	key := records.Key{Kind: records.KindAssignment, Namespace: "fleet", Name: "addons"}
	b := Bridge{Key: key, Namespace: "fleet", Selector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
		Labels:  map[string]string{"cluster.x-k8s.io/watch-filter": "x"},
		Modules: []Carried{{Module: "crds", Revision: "r1"}, {Module: "app", Revision: "r2"}}}
	crs, err := b.ClusterResourceSet()
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(crs.Object, "spec", "strategy"); s != "ApplyOnce" {
		t.Errorf("strategy %q, want ApplyOnce: the next apply owns what the bridge created", s)
	}
	res, _, _ := unstructured.NestedSlice(crs.Object, "spec", "resources")
	if len(res) != 2 || res[0].(map[string]any)["name"] != ConfigMapName(key, "crds") || res[1].(map[string]any)["name"] != ConfigMapName(key, "app") {
		t.Errorf("resources %v, want the ConfigMaps of crds then app", res)
	}
	if sel, _, _ := unstructured.NestedStringMap(crs.Object, "spec", "clusterSelector", "matchLabels"); sel["env"] != "prod" {
		t.Errorf("clusterSelector %v, want env=prod", sel)
	}
	if crs.GetLabels()["cluster.x-k8s.io/watch-filter"] != "x" || crs.GetLabels()[LabelBridgeOf] != key.Hash() {
		t.Errorf("labels %v", crs.GetLabels())
	}
}

func TestSelectorRefusesEmpty(t *testing.T) {
	if _, err := SelectorFor(labels.Everything()); err == nil {
		t.Error("an empty selector is refused: a ClusterResourceSet with one matches nothing")
	}
	sel, err := labels.Parse("env in (prod,staging),!paused")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := SelectorFor(sel)
	if err != nil || len(ls.MatchExpressions) != 2 {
		t.Errorf("SelectorFor(%s) = %v, %v", sel, ls, err)
	}
}

func TestPayloadMarksEveryObjectAndSizeIsChecked(t *testing.T) {
	set, err := manifest.Parse("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: a\n  annotations: {team: blue}\ndata: {k: v}\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Payload("gradual/module/fleet/a.m", set.Objects)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(p, AnnotationBridge+": gradual/module/fleet/a.m"); n != 2 {
		t.Errorf("%d objects marked, want 2:\n%s", n, p)
	}
	if !strings.Contains(p, "team: blue") {
		t.Errorf("the object's own annotations are kept:\n%s", p)
	}
	if set.Objects[1].GetAnnotations()[AnnotationBridge] != "" {
		t.Error("Payload changed the module's objects")
	}
	if err := CheckSize("big", strings.Repeat("x", MaxConfigMapSize+1)); err == nil || !strings.Contains(err.Error(), "1048577 bytes") || !strings.Contains(err.Error(), "1048576") {
		t.Errorf("CheckSize: %v, want the size and the limit", err)
	}
	if err := CheckSize("small", p); err != nil {
		t.Error(err)
	}
}

func TestHeldObjectsAreWhatThePayloadCarries(t *testing.T) {
	set, err := manifest.Parse("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: a\ndata: {k: v}\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Payload("gradual/module/fleet/a.m", set.Objects)
	if err != nil {
		t.Fatal(err)
	}
	h := &Held{payloads: map[string]string{"m": p, "broken": "kind: [\n"}}
	objs, err := h.Objects("m")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(got)
	if want := []string{"ConfigMap a/c", "Namespace /a"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if objs, err := h.Objects("absent"); objs != nil || err != nil {
		t.Errorf("a module the bridge does not carry: %v, %v; want none", objs, err)
	}
	if _, err := h.Objects("broken"); err == nil || !strings.Contains(err.Error(), `module "broken"`) {
		t.Errorf("an unreadable ConfigMap: %v, want an error naming the module", err)
	}
}
