package rollout

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// fluxSettings is `delivery.flux` as the Flux engine takes it; nil for direct delivery (or while
// unknown).
func (m *Model) fluxSettings(ctx context.Context) (*delivery.FluxSettings, diag.Diagnostics) {
	return fleetresource.FluxSettings(ctx, m.Delivery, m.registry)
}

// service is the delivery service for m: direct, or through Flux with `delivery.flux`; moving
// from another engine while the private state says the rollout moves from it.
func (r *rolloutResource) service(ctx context.Context, m *Model) (*delivery.Service, diag.Diagnostics) {
	svc, diags := fleetresource.Service(ctx, r.Data.Delivery, m.Delivery, m.registry)
	if from := m.private.MovingFrom; from != nil {
		svc = svc.MovingFrom(from.Flux)
	}
	return svc, diags
}

// movingFrom is the engine plan's private state says the rollout moves from
// (fleetresource.MovingFrom); nil on create.
func movingFrom(ctx context.Context, plan, prior *Model) (*engineRef, diag.Diagnostics) {
	if prior == nil {
		return nil, nil
	}
	return fleetresource.MovingFrom(ctx, plan.Delivery, prior.Delivery, prior.private.MovingFrom)
}

// settleMove ends the move from another engine once the fleet as apply left it (after) holds no
// cluster the old engine still holds, nor one it could not read (a skipped cluster may still be
// held by it: the move goes on until it is read).
func (m *Model) settleMove(after *delivery.Observation) {
	if m.private.MovingFrom != nil && after != nil && after.Previous != nil && len(after.Previous) == 0 && len(after.Skipped) == 0 {
		m.private.MovingFrom = nil
	}
}

// warnMove says at plan what a move between engines does.
func warnMove(diags *diag.Diagnostics, svc *delivery.Service, clusters int) {
	if !svc.Moving() {
		return
	}
	from, to := svc.PreviousEngineName(), svc.EngineName()
	diags.AddAttributeWarning(fleetresource.PathDelivery, "Delivery Engine Moves",
		fmt.Sprintf("The rollout moves from %s to %s, in waves (update_limit, canary and max_failures as for any revision): %d cluster(s) still on %s. "+
			"On each, %s delivers the same content and verifies it; only once it verified there, at the end of the apply, does %s let go of "+
			"the cluster, without pruning or deleting any object (its records and its field manager's marks go). Nothing is pruned on the way. "+
			"A cluster that does not verify through %s stays on %s, is counted against max_failures and is not recorded as a failure "+
			"of the revision; the next apply moves it again.", from, to, clusters, from, to, from, to, from))
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
		case !fleetresource.FluxDecrypts(m.Delivery):
			fleetresource.NotThroughFlux(&diags, pathSensitive, fleetresource.FluxGapSensitive, "`sensitive_manifests`", "the rollout")
		case !m.Values.IsNull():
			diags.AddAttributeError(pathSensitive, "Sensitive Manifests With Values Not Delivered Through Flux Yet",
				"`sensitive_manifests` are published encrypted through Flux, and with `values` each cluster's rendering is compared "+
					"with what its record holds, which through Flux is the encrypted objects: the two cannot be used together yet. "+
					"Leave `values` out, or deliver directly (leave `delivery` out).")
		}
	}
	if !m.Adopt.IsNull() && !m.Adopt.IsUnknown() && !m.Adopt.ValueBool() {
		fleetresource.NotThroughFlux(&diags, path.Root("adopt"), fleetresource.FluxGapRefuseAdoption, "`adopt = false`", "the rollout")
	}
	return diags
}
