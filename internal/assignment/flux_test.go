package assignment

import (
	"reflect"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestModuleSpecShapesKustomizations checks what each module's delivery spec asks of its
// Kustomizations when the assignment delivers through Flux: its direct dependencies (Flux
// chains the rest) as dependsOn, by the modules' record keys (which name their Kustomizations),
// and ApplyOnce only in that mode.
func TestModuleSpecShapesKustomizations(t *testing.T) {
	for _, mode := range []Mode{Reconcile, ApplyOnce} {
		spec := worldSpec(t, mode, worldPolicy(1, 0, "halt"))
		want := map[string][]records.Key{"crds": nil, "app": {spec.ModuleKey("crds")}, "mon": {spec.ModuleKey("app")}}
		for _, m := range spec.Modules {
			k := spec.moduleSpec(m).Kustomize
			if !reflect.DeepEqual(k.DependsOn, want[m.Name]) {
				t.Errorf("%s: module %s dependsOn %v, want %v", mode, m.Name, k.DependsOn, want[m.Name])
			}
			if k.ApplyOnce != (mode == ApplyOnce) {
				t.Errorf("%s: module %s ApplyOnce = %t", mode, m.Name, k.ApplyOnce)
			}
		}
		if removed := removedSpec(spec, "app"); removed.Kustomize.ApplyOnce || len(removed.Kustomize.DependsOn) > 0 {
			t.Errorf("removedSpec shapes Kustomizations (%+v): removal deletes them", removed.Kustomize)
		}
	}
}
