package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// Moving a resource between engines (adding or removing `delivery.flux`) is an update carried
// out in waves (DeliveryAttribute). The resource's private state keeps the engine it moves from
// until every picked cluster verified on the new one and the old one let go of it: an apply that
// fails part-way saves the new `delivery` in the state while some clusters are still on the old
// engine, so the prior `delivery` alone cannot tell.

// EngineRef is an engine as a resource's private state keeps it: Flux with its settings (never
// the credentials: FluxSettings keeps them out of JSON), or direct delivery (Flux nil).
type EngineRef struct {
	Flux *delivery.FluxSettings `json:"flux,omitempty"`
}

// Engine names ref's engine as EngineOf does.
func (ref *EngineRef) Engine() string {
	if ref.Flux != nil {
		return "flux"
	}
	return "direct"
}

// MovingFrom is the engine a plan moves from: the prior state's (priorDelivery) when the plan's
// `delivery` chooses another, or the one an earlier apply of a move left clusters on (kept, from
// the prior private state) while the plan's still chooses the engine moved to; nil otherwise (no
// move, or a `delivery` not known yet). A create moves from nothing: callers pass no prior.
func MovingFrom(ctx context.Context, planDelivery, priorDelivery types.Object, kept *EngineRef) (*EngineRef, diag.Diagnostics) {
	if planDelivery.IsUnknown() {
		return nil, nil
	}
	after, diags := EngineOf(ctx, planDelivery)
	before, d := EngineOf(ctx, priorDelivery)
	diags.Append(d...)
	switch {
	case before != after && before == "flux":
		// The settings as the state holds them: letting go of the Kustomizations and reading the
		// records push nothing, so no credential is needed.
		settings, d := FluxSettings(ctx, priorDelivery, NoFluxWriteOnly())
		diags.Append(d...)
		return &EngineRef{Flux: settings}, diags
	case before != after:
		return &EngineRef{}, diags
	case kept != nil && kept.Engine() != after:
		return kept, diags
	}
	return nil, diags
}
