package inplaceupdate

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// The in-place update's own steps of its plan (fleetresource.Planner); ModifyPlan (resource.go)
// runs them through fleetresource.ModifyPlan.

// Deletion: none. Destroying the resource forgets it and undoes nothing (Destroy), and its
// replacement re-runs the update, so there is nothing deleted to warn of
// (fleetresource.Planner).
func (r *updateResource) Deletion(context.Context, *Model, *Model, bool) (fleetresource.Deletion, bool) {
	return fleetresource.Deletion{}, false
}

// FromPrior starts the plan's private state from what the refresh read of the fleet form's
// clusters; the waves and the preview of an earlier plan never carry over: only this plan's
// are carried out (fleetresource.Planner).
func (r *updateResource) FromPrior(_ context.Context, plan, prior *Model) diag.Diagnostics {
	plan.private = fleetPrivate{}
	if prior != nil {
		plan.private.Clusters = prior.private.Clusters
	}
	return nil
}

// ReadsWriteOnlyFirst: ContentKnown needs the write-only bootstrap patch (fleetresource.Planner).
func (r *updateResource) ReadsWriteOnlyFirst() bool { return true }

// ShowWriteOnly shows the bootstrap patch by its digest (fleetresource.Planner).
func (r *updateResource) ShowWriteOnly(_ context.Context, plan *Model) diag.Diagnostics {
	plan.BootstrapDigest = digest(plan.BootstrapConfigSpecPatch)
	return nil
}

// ContentKnown reports whether the machines can be planned: that needs every input, the pacing
// included, and the provider, as the plan reads the machines and asks the extensions
// (fleetresource.Planner).
func (r *updateResource) ContentKnown(_ context.Context, plan *Model, _ tfsdk.Config) bool {
	return r.Data != nil && plan.known() && !plan.UpdateLimit.IsUnknown() && !plan.MaxFailures.IsUnknown() && !plan.Canary.IsUnknown()
}

// MarkContentUnknown leaves the revision to apply (fleetresource.Planner).
func (r *updateResource) MarkContentUnknown(plan *Model) { plan.Revision = types.StringUnknown() }

// MarkObservedUnknown leaves what the machines decide to apply (fleetresource.Planner).
func (r *updateResource) MarkObservedUnknown(plan *Model) {
	plan.Plan, plan.Status = types.ListUnknown(types.ObjectType{AttrTypes: machineAttrTypes}), types.MapUnknown(types.StringType)
	plan.Summary, plan.Attention, plan.Waves = types.MapUnknown(types.Int64Type), types.MapUnknown(types.StringType), types.StringUnknown()
}

// PlanKnown names the update (`id`) and plans its machines: the fleet form in waves
// (planFleet), the single-owner form against its machines (planSingle) (fleetresource.Planner).
func (r *updateResource) PlanKnown(ctx context.Context, plan, prior *Model, _ bool, diags *diag.Diagnostics) bool {
	plan.ID = plan.id()
	if plan.fleet() {
		return r.planFleet(ctx, plan, prior, diags)
	}
	return r.planSingle(ctx, plan, prior, diags)
}

// SetPlan: see fleetresource.Planner.
func (r *updateResource) SetPlan(ctx context.Context, plan *Model, to *tfsdk.Plan) diag.Diagnostics {
	return plan.setPlan(ctx, to)
}
