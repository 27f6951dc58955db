package rollout

import (
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// Rules match objects with the default namespace applied, so the halves are told apart after
// it: an object of manifests that names no namespace is still public, and so still checked.
func TestSplitHalvesAfterTheDefaultNamespace(t *testing.T) {
	public := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {password: x}\n"
	hidden := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db2, namespace: app}\ndata: {password: y}\n"
	set, err := manifest.Bundle(public, hidden)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.DefaultNamespace("app"); err != nil {
		t.Fatal(err)
	}
	shown, secret := splitHalves(set, public)
	if len(shown) != 1 || shown[0].GetName() != "db" || shown[0].GetNamespace() != "app" {
		t.Errorf("shown = %v", shown)
	}
	if len(secret) != 1 || secret[0].GetName() != "db2" {
		t.Errorf("hidden = %v", secret)
	}
}
