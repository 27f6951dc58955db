package manifest

import (
	"strings"
	"testing"
)

func TestDefaultNamespace(t *testing.T) {
	set, err := Parse(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: elsewhere}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: Gadget, plural: gadgets}}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: tls}
`)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := set.Revision()
	if err := set.DefaultNamespace("apps"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(set.Keys(), "; ")
	want := "/ConfigMap apps/settings; /Namespace /apps; apiextensions.k8s.io/CustomResourceDefinition /gadgets.example.com; " +
		"apps/Deployment elsewhere/web; cert-manager.io/Certificate apps/tls; example.com/Gadget /g; rbac.authorization.k8s.io/ClusterRole /reader"
	if got != want {
		t.Errorf("keys after DefaultNamespace:\n got %s\nwant %s", got, want)
	}
	if after, _ := set.Revision(); after == before {
		t.Error("the revision did not change with the namespaces")
	}

	dup, err := Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: apps}\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := dup.DefaultNamespace("apps"); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("DefaultNamespace on a clash = %v, want defined twice", err)
	}
	if err := dup.DefaultNamespace(""); err != nil {
		t.Errorf("no default namespace: %v", err)
	}
}

// Rules match objects with the default namespace applied, so the halves are told apart after
// it: an object of the public half that names no namespace is still public, and so still checked.
func TestHalvesAfterTheDefaultNamespace(t *testing.T) {
	public := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {password: x}\n"
	hidden := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db2, namespace: app}\ndata: {password: y}\n"
	set, err := Bundle(public, hidden)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.DefaultNamespace("app"); err != nil {
		t.Fatal(err)
	}
	shown, secret := set.Halves(public)
	if len(shown) != 1 || shown[0].GetName() != "db" || shown[0].GetNamespace() != "app" {
		t.Errorf("shown = %v", shown)
	}
	if len(secret) != 1 || secret[0].GetName() != "db2" {
		t.Errorf("hidden = %v", secret)
	}
}
