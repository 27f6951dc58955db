package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// warnDeletion warns, at plan time, what a destroy (no planned state) or a replacement (name,
// namespace or record_namespace changed) of the assignment deletes from the clusters.
func warnDeletion(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics) {
	if req.State.Raw.IsNull() {
		return
	}
	var prior Model
	if d := req.State.Get(ctx, &prior); d.HasError() {
		return
	}
	if d := prior.LoadPrivate(ctx, req.Private); d.HasError() {
		return
	}
	if req.Plan.Raw.IsNull() {
		fleetresource.WarnDeletion(diags, prior.deletion(ctx, ""))
		return
	}
	var plan Model
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if changed := fleetresource.IdentityChange(fleetresource.Identity{Name: plan.Name, Namespace: plan.Namespace, RecordNamespace: plan.RecordNamespace},
		fleetresource.Identity{Name: prior.Name, Namespace: prior.Namespace, RecordNamespace: prior.RecordNamespace}); changed != "" {
		fleetresource.WarnDeletion(diags, prior.deletion(ctx, changed))
	}
}

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
