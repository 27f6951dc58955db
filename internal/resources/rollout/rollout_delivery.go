package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"

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
