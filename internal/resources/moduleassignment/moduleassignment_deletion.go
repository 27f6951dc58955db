package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// deletion is what destroying the assignment m (a state) removes: on each cluster, the objects
// of the modules bound there.
func (m *Model) deletion(ctx context.Context, replacing string) fleetresource.Deletion {
	d := fleetresource.Deletion{What: "module assignment " + m.Namespace.ValueString() + "/" + m.Name.ValueString(),
		Orphan: m.DeletionPolicy.ValueString() == "orphan", Replacing: replacing}
	objects := map[string]int{}
	if mods, diags := m.modules(ctx); !diags.HasError() {
		for _, mm := range mods {
			if set, err := manifest.Parse(mm.Manifests.ValueString()); err == nil {
				objects[mm.Name.ValueString()] = len(set.Objects)
			}
		}
	}
	for name, objs := range m.SensitiveObjects.Elements() {
		if list, ok := objs.(types.List); ok {
			objects[name] += len(list.Elements())
		}
	}
	for _, cs := range m.private.Clusters {
		bound := false
		for _, ms := range cs.Modules {
			if ms.Result != "" {
				bound = true
				d.Objects += objects[ms.Module]
			}
		}
		if bound {
			d.Clusters++
		}
	}
	return d
}
