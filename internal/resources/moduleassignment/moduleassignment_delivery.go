package moduleassignment

import (
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// refuseWithFlux refuses, naming the attribute, what the Flux engine cannot deliver yet: the
// same as for a rollout (adopt = false), and what only an assignment has (sensitive_manifests).
// `values` goes through: each module revision's artifact is its template, which each cluster's
// Kustomization renders with the cluster's variables, as a rollout's (delivery's fluxArtifact);
// so do verify.health_checks, as each module's
// Kustomizations' healthCheckExprs (internal/delivery/flux.go).
func (m *Model) refuseWithFlux(diags *diag.Diagnostics) {
	if m.Delivery.IsNull() || m.Delivery.IsUnknown() {
		return
	}
	if !m.Adopt.IsNull() && !m.Adopt.IsUnknown() && !m.Adopt.ValueBool() {
		fleetresource.NotThroughFlux(diags, path.Root("adopt"), fleetresource.FluxGapRefuseAdoption, "`adopt = false`", "the assignment")
	}
	if len(m.sensitive) > 0 {
		fleetresource.NotThroughFlux(diags, pathModules, fleetresource.FluxGapSensitiveModules, "`modules[].sensitive_manifests`", "the assignment")
	}
}

// refuseModeChange refuses a change of mode under delivery.flux: the mode lives in each
// cluster's Kustomizations (ApplyOnce's IfNotPresent annotation), which a run pins only where
// a module changes, and ApplyOnce changes none where a module runs already, so the clusters
// that have the modules would keep the old behaviour.
func refuseModeChange(plan, prior *Model, diags *diag.Diagnostics) {
	if prior == nil || plan.Delivery.IsNull() || plan.Delivery.IsUnknown() || prior.Delivery.IsNull() ||
		plan.Mode.IsUnknown() || plan.Mode.Equal(prior.Mode) {
		return
	}
	diags.AddAttributeError(path.Root("mode"), "Mode Change Not Delivered Through Flux Yet",
		"With `delivery.flux` the mode is part of every cluster's Kustomizations (`ApplyOnce`: Flux creates objects and never "+
			"updates them; `Reconcile`: Flux re-applies them on its interval), and this apply would not change the Kustomizations of "+
			"the clusters that have the modules already. Keep mode = "+prior.Mode.String()+", or replace the assignment (for example "+
			"under another name) to deliver the modules in the other mode.")
}
