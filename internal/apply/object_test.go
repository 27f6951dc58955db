package apply

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func names(objs []*unstructured.Unstructured) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = RefOf(o).String()
	}
	return out
}

func TestStages(t *testing.T) {
	in := []*unstructured.Unstructured{
		obj("apps/v1", "Deployment", "demo", "web"),
		obj("example.com/v1", "Widget", "demo", "w"),
		obj("v1", "ConfigMap", "demo", "cfg"),
		obj("v1", "Namespace", "", "demo"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"),
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "hook"),
		obj("v1", "Namespace", "", "another"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader"),
	}
	before := names(in)
	definitions, resources := Stages(in)
	if got, want := names(definitions), []string{
		"CustomResourceDefinition widgets.example.com", "Namespace another", "Namespace demo",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("definitions = %q, want %q", got, want)
	}
	if got, want := names(resources), []string{
		"ClusterRole reader", "ConfigMap demo/cfg", "Deployment demo/web", "Widget demo/w",
		"ValidatingWebhookConfiguration hook",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("resources = %q, want %q", got, want)
	}
	if got := names(in); !reflect.DeepEqual(got, before) {
		t.Errorf("Stages reordered its input: %q", got)
	}
}

func TestDeleteOrder(t *testing.T) {
	inv := InventoryOf([]*unstructured.Unstructured{
		obj("v1", "Namespace", "", "demo"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"),
		obj("v1", "ConfigMap", "demo", "cfg"),
		obj("apps/v1", "Deployment", "demo", "web"),
		obj("example.com/v1", "Widget", "demo", "w"),
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "hook"),
	})
	var got []string
	for _, r := range deleteOrder(inv) {
		got = append(got, r.String())
	}
	want := []string{
		"ValidatingWebhookConfiguration hook", "Widget demo/w", "Deployment demo/web", "ConfigMap demo/cfg",
		"Namespace demo", "CustomResourceDefinition widgets.example.com",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deleteOrder = %q, want %q", got, want)
	}
}

func TestInventory(t *testing.T) {
	prev := InventoryOf([]*unstructured.Unstructured{
		obj("v1", "ConfigMap", "demo", "b"),
		obj("apps/v1", "Deployment", "demo", "web"),
		obj("v1", "ConfigMap", "demo", "a"),
		obj("v1", "ConfigMap", "demo", "a"), // listed twice: once in the inventory
		obj("policy/v1beta1", "PodDisruptionBudget", "demo", "web"),
	})
	if len(prev) != 4 || prev[0].Name != "a" || prev[0].Kind != "ConfigMap" {
		t.Fatalf("InventoryOf = %v: want 4 refs, sorted, ConfigMap a first", prev)
	}
	next := InventoryOf([]*unstructured.Unstructured{
		obj("apps/v1", "Deployment", "demo", "web"),
		obj("v1", "ConfigMap", "demo", "a"),
		obj("policy/v1", "PodDisruptionBudget", "demo", "web"), // a new API version is the same object
		obj("v1", "Secret", "demo", "new"),
	})
	stale := Diff(prev, next)
	if want := (Inventory{{Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "b"}}); !reflect.DeepEqual(stale, want) {
		t.Errorf("Diff = %v, want %v", stale, want)
	}
	if Diff(next, next) != nil {
		t.Errorf("Diff of an inventory with itself = %v", Diff(next, next))
	}
	if !next.Contains(ObjectRef{Group: "policy", Version: "v1beta1", Kind: "PodDisruptionBudget", Namespace: "demo", Name: "web"}) {
		t.Error("Contains ignores the version")
	}

	raw, err := json.Marshal(prev)
	if err != nil {
		t.Fatal(err)
	}
	var back Inventory
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, prev) {
		t.Errorf("JSON round trip: %v, %v (%s)", back, err, raw)
	}
	if want := `{"version":"v1","kind":"ConfigMap","namespace":"demo","name":"a"}`; string(raw[1:len(want)+1]) != want {
		t.Errorf("JSON = %s, want it to start with %s", raw, want)
	}
}

func TestRefString(t *testing.T) {
	for ref, want := range map[ObjectRef]string{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}: "Deployment demo/web",
		{Version: "v1", Kind: "Namespace", Name: "demo"}:                                   "Namespace demo",
	} {
		if got := ref.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", ref, got, want)
		}
	}
}
