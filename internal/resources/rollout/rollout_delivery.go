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
	return shared.FluxSettings(ctx, m.Delivery, m.registry)
}

// service is the delivery service for m: direct, or through Flux with `delivery.flux`.
func (r *rolloutResource) service(ctx context.Context, m *Model) (*delivery.Service, diag.Diagnostics) {
	settings, diags := m.fluxSettings(ctx)
	return r.Data.Delivery.WithFlux(settings), diags
}

// refuseWithFlux refuses at plan, naming the attribute, what the Flux engine cannot deliver yet
// beyond what spec refuses itself (the check Job): `sensitive_manifests` without
// `delivery.flux.decryption`, whose objects would be published as an artifact anyone who can
// pull from the registry can read, or with `values` (each cluster's rendering is compared with
// what its record holds, which through Flux is the encrypted objects), and `adopt = false`,
// which needs the workload clusters read.
func (m *Model) refuseWithFlux() (diags diag.Diagnostics) {
	if m.Delivery.IsNull() || m.Delivery.IsUnknown() {
		return nil
	}
	if !m.Sensitive.IsNull() && !m.Sensitive.IsUnknown() && strings.TrimSpace(m.Sensitive.ValueString()) != "" {
		switch {
		case !shared.FluxDecrypts(m.Delivery):
			shared.NotThroughFlux(&diags, pathSensitive, shared.FluxGapSensitive, "`sensitive_manifests`", "the rollout")
		case !m.Values.IsNull():
			diags.AddAttributeError(pathSensitive, "Sensitive Manifests With Values Not Delivered Through Flux Yet",
				"`sensitive_manifests` are published encrypted through Flux, and with `values` each cluster's rendering is compared "+
					"with what its record holds, which through Flux is the encrypted objects: the two cannot be used together yet. "+
					"Leave `values` out, or deliver directly (leave `delivery` out).")
		}
	}
	if !m.Adopt.IsNull() && !m.Adopt.IsUnknown() && !m.Adopt.ValueBool() {
		shared.NotThroughFlux(&diags, path.Root("adopt"), shared.FluxGapRefuseAdoption, "`adopt = false`", "the rollout")
	}
	return diags
}
