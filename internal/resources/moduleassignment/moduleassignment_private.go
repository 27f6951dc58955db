package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// privateState is what the assignment keeps in Terraform's private state: stored with the
// resource, handed back to the provider, never shown in a plan. It holds the per-cluster detail
// plans are worked out from, so that what a reviewer reads (`summary`, `attention`, `waves`)
// stays the size of the change, not of the fleet.
type privateState struct {
	// Clusters are the picked (and leaving) clusters with their modules, as the last refresh or
	// apply read them.
	Clusters []assignment.ClusterStatus
	// PlannedWaves are, per module, the clusters of each wave the plan showed as counts; apply
	// carries out exactly these. Nil when the plan could not plan them (create, other clusters).
	PlannedWaves map[string][][]string
	// PlannedLeaving are the clusters the plan showed in `leaving`; apply lets go of exactly
	// those that still leave.
	PlannedLeaving []string
	// Bridged is set once an apply wrote the bridge for joiners (follow_joins) and cleared once it
	// is removed: an assignment that never had one makes no request about it, so no permission
	// on ClusterResourceSets is needed without follow_joins.
	Bridged *bool
	// MovingFrom is the engine the assignment moves from, until every picked cluster verified
	// every module on the new one and the old one let go of it (moduleassignment_move.go); nil
	// when it moves from none. Kept here, not only read from the prior `delivery`, since an
	// apply that fails part-way saves the new `delivery` in the state while some modules are
	// still on the old engine somewhere.
	MovingFrom *engineRef
}

// Private state keys; values are JSON.
const (
	privateClustersKey = "clusters"
	privateWavesKey    = "planned_waves"
	privatePlannedKey  = "planned_leaving"
	privateBridgedKey  = "bridged"
	privateMovingKey   = "moving_from"
)

// LoadPrivate reads the private state; a missing key leaves its field nil.
func (m *Model) LoadPrivate(ctx context.Context, from fleetresource.PrivateGetter) diag.Diagnostics {
	return fleetresource.LoadPrivateJSON(ctx, from, "assignment", map[string]any{privateClustersKey: &m.private.Clusters, privateWavesKey: &m.private.PlannedWaves,
		privatePlannedKey: &m.private.PlannedLeaving, privateBridgedKey: &m.private.Bridged, privateMovingKey: &m.private.MovingFrom})
}

// SavePrivate writes the private state; a nil field removes its key.
func (m *Model) SavePrivate(ctx context.Context, to fleetresource.PrivateSetter) diag.Diagnostics {
	return fleetresource.SavePrivateJSON(ctx, to, map[string]any{privateClustersKey: m.private.Clusters, privateWavesKey: m.private.PlannedWaves,
		privatePlannedKey: m.private.PlannedLeaving, privateBridgedKey: m.private.Bridged, privateMovingKey: m.private.movingValue()})
}
