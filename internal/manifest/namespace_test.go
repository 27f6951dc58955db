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
