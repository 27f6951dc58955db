package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// fluxSettings is `delivery.flux` as the Flux engine takes it; nil for direct delivery (or while
// unknown).
func (m *Model) fluxSettings(ctx context.Context) (*delivery.FluxSettings, diag.Diagnostics) {
	return shared.FluxSettings(ctx, m.Delivery, m.registryPassword, m.registryToken)
}

// service is the delivery service for m: direct, or through Flux with `delivery.flux`. Every
// module goes through it: one artifact per module revision, one Kustomization per (module,
// cluster).
func (r *assignmentResource) service(ctx context.Context, m *Model) (*delivery.Service, diag.Diagnostics) {
	settings, diags := m.fluxSettings(ctx)
	return r.Data.Delivery.WithFlux(settings), diags
}

// refuseWithFlux refuses, naming the attribute, what the Flux engine cannot deliver yet: the
// same as for a rollout (values, verify.health_checks), and what only an assignment has
// (deletion_policy = "orphan", sensitive_manifests).
func (m *Model) refuseWithFlux(spec assignment.Spec, diags *diag.Diagnostics) {
	if m.Delivery.IsNull() || m.Delivery.IsUnknown() {
		return
	}
	if spec.Values != nil {
		// Flux pulls one artifact per module revision for every cluster; per-cluster renderings
		// would need Flux's own postBuild.substitute per Kustomization, which this engine does not set yet.
		diags.AddAttributeError(shared.PathValues, "Values Not Delivered Through Flux Yet",
			"`values` renders each module's manifests per cluster, and `delivery.flux` publishes one artifact per module revision for every cluster: "+
				"the two cannot be used together yet. Deliver directly (leave `delivery` out), or use one rendering for every cluster.")
	}
	if !spec.Health.Empty() {
		// Through Flux, the cluster's Kustomization judges the objects, not this provider.
		diags.AddAttributeError(shared.PathHealthChecks, "Health Checks Not Delivered Through Flux Yet",
			"`verify.health_checks` are evaluated by the provider as it waits for the objects, and with `delivery.flux` Flux's "+
				"Kustomization judges them: the two cannot be used together yet. Deliver directly (leave `delivery` out).")
	}
	if spec.Orphan {
		// Deleting a Kustomization makes Flux prune what it applied; keeping the objects would
		// need the Kustomization's own deletionPolicy, which this engine does not set yet.
		diags.AddAttributeError(path.Root("deletion_policy"), "Orphan Not Delivered Through Flux Yet",
			"`deletion_policy = \"orphan\"` keeps a module's objects when a cluster leaves or the assignment is destroyed, and with "+
				"`delivery.flux` a cluster loses a module by the deletion of its Kustomization, after which Flux prunes what it applied: "+
				"the two cannot be used together yet. Use deletion_policy = \"delete\", or deliver directly (leave `delivery` out).")
	}
	if len(m.sensitive) > 0 {
		// An artifact is readable by whoever can pull from the registry: Secrets' values would
		// leave the places this provider keeps them out of.
		diags.AddAttributeError(pathModules, "Sensitive Manifests Not Delivered Through Flux Yet",
			"`modules[].sensitive_manifests` are kept out of the plan, the state and the records, and `delivery.flux` publishes every "+
				"object of a module as an OCI artifact that anyone who can pull from the registry can read: the two cannot be used "+
				"together yet. Deliver directly (leave `delivery` out), or deliver the Secrets another way.")
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
