package rollout

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// fluxSettings is `delivery.flux` as the Flux engine takes it; nil for direct delivery (or while
// unknown).
func (m *Model) fluxSettings(ctx context.Context) (*delivery.FluxSettings, diag.Diagnostics) {
	return shared.FluxSettings(ctx, m.Delivery, m.registryPassword, m.registryToken)
}

// service is the delivery service for m: direct, or through Flux with `delivery.flux`.
func (r *rolloutResource) service(ctx context.Context, m *Model) (*delivery.Service, diag.Diagnostics) {
	settings, diags := m.fluxSettings(ctx)
	return r.Data.Delivery.WithFlux(settings), diags
}

// refuseWithFlux refuses at plan, naming the attribute, what the Flux engine cannot deliver yet
// beyond what spec refuses itself (health checks, the check Job): `sensitive_manifests`, whose
// objects would be published as an artifact anyone who can pull from the registry can read,
// and `deletion_policy = "orphan"`, since a cluster loses a revision by the deletion of its
// Kustomization, after which Flux prunes.
func (m *Model) refuseWithFlux() (diags diag.Diagnostics) {
	if m.Delivery.IsNull() || m.Delivery.IsUnknown() {
		return nil
	}
	if !m.Sensitive.IsNull() && !m.Sensitive.IsUnknown() && strings.TrimSpace(m.Sensitive.ValueString()) != "" {
		diags.AddAttributeError(pathSensitive, "Sensitive Manifests Not Delivered Through Flux Yet",
			"`sensitive_manifests` are kept out of the plan, the state and the records, and `delivery.flux` publishes every "+
				"object of a revision as an OCI artifact that anyone who can pull from the registry can read: the two cannot be used "+
				"together yet. Deliver directly (leave `delivery` out), or deliver the Secrets another way.")
	}
	if m.DeletionPolicy.ValueString() == "orphan" {
		diags.AddAttributeError(path.Root("deletion_policy"), "Orphan Not Delivered Through Flux Yet",
			"`deletion_policy = \"orphan\"` keeps the objects when a cluster leaves or the rollout is destroyed, and with "+
				"`delivery.flux` a cluster loses them by the deletion of its Kustomization, after which Flux prunes what it applied: "+
				"the two cannot be used together yet. Use deletion_policy = \"delete\", or deliver directly (leave `delivery` out).")
	}
	return diags
}
