package moduleassignment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// Moving the assignment between engines (adding or removing `delivery.flux`) is an update, as
// for a rollout (fleetresource.DeliveryAttribute()): the private state keeps the engine it
// moves from (privateState.MovingFrom) until every picked cluster verified every module on the
// new engine and the old one let go of it, and the delivery service moves each module from it
// (delivery.Service.MovingFrom; assignment's move.go carries it out module by module).

// engineRef is an engine as the private state keeps it (fleetresource.EngineRef).
type engineRef = fleetresource.EngineRef

// planMove sets, in plan's private state, the engine the assignment moves from (movingFrom).
func (m *Model) planMove(ctx context.Context, prior *Model) diag.Diagnostics {
	var diags diag.Diagnostics
	m.private.MovingFrom, diags = movingFrom(ctx, m, prior)
	return diags
}

// movingFrom is the engine plan's private state says the assignment moves from
// (fleetresource.MovingFrom); nil on create.
func movingFrom(ctx context.Context, plan, prior *Model) (*engineRef, diag.Diagnostics) {
	if prior == nil {
		return nil, nil
	}
	return fleetresource.MovingFrom(ctx, plan.Delivery, prior.Delivery, prior.private.MovingFrom)
}

// moving is svc moving from the engine m's private state names, svc itself when it names none.
func (m *Model) moving(svc *delivery.Service) *delivery.Service {
	if from := m.private.MovingFrom; from != nil && svc != nil {
		return svc.MovingFrom(from.Flux)
	}
	return svc
}

// movedFromSettings are the rules every module's content is taken under (settings, without any
// engine's pull settings) with the pull settings of the engine the assignment moves from, for
// each module's assignment.Module.MovedFromRevision; moving is false when it moves from none.
func (m *Model) movedFromSettings(settings []byte) (_ []byte, moving bool) {
	from := m.private.MovingFrom
	if from == nil {
		return nil, false
	}
	return append(slices.Clone(settings), delivery.RevisionSettings(from.Flux)...), true
}

// settleMove ends the move once the fleet as apply or a refresh left it (after) holds no
// module the old engine still holds anywhere, nor a skipped cluster (assignment's MoveDone).
func (m *Model) settleMove(after *assignment.Observation) {
	if m.private.MovingFrom != nil && after.MoveDone() {
		m.private.MovingFrom = nil
	}
}

// warnMove says at plan what a move between engines does: moving is how many (module, cluster)
// pairs the old engine is still in charge of.
func warnMove(diags *diag.Diagnostics, svc *delivery.Service, obs *assignment.Observation) {
	if !svc.Moving() || obs == nil {
		return
	}
	from, to := svc.PreviousEngineName(), svc.EngineName()
	diags.AddAttributeWarning(fleetresource.PathDelivery, "Delivery Engine Moves",
		fmt.Sprintf("The assignment moves from %s to %s, module by module in depends_on order, each in waves (update_limit, canary and "+
			"max_failures as for any revision): %d module placement(s) still on %s. On each cluster, %s delivers the module's same content "+
			"and verifies it; only once it verified there, at the end of that module's waves, does %s let go of the module there, without "+
			"pruning or deleting any object (its records and its field manager's marks go). Nothing is pruned on the way. A cluster "+
			"where a module does not verify through %s stays on %s for that module, is counted against max_failures, is not recorded "+
			"as a failure of the module's revision, and blocks the modules that depend on it there; the next apply moves it again.",
			from, to, obs.Moving(), from, to, from, to, from))
}

// warnMoved says at the end of an apply what the move between engines did (res of the run).
func warnMoved(diags *diag.Diagnostics, res *assignment.RunResult) {
	if len(res.Moved) > 0 {
		diags.AddWarning("Clusters Moved Between Engines", "These modules verified on the new engine, and the engine the assignment "+
			"moves from let go of them without pruning or deleting anything, on:\n  "+strings.Join(res.Moved, "\n  "))
	}
	if len(res.MoveFailures) > 0 {
		diags.AddWarning("Engine Not Let Go Yet", "These modules verified on the new engine, but the engine the assignment moves from "+
			"still holds them; the next apply lets it go:\n  "+strings.Join(res.MoveFailures, "\n  "))
	}
}

// loadMoving reads only MovingFrom from the private state (a refresh, and a destroy, keep it:
// an assignment moving between engines is read on, and removed from, both).
func (m *Model) loadMoving(ctx context.Context, from fleetresource.PrivateGetter) diag.Diagnostics {
	return fleetresource.LoadPrivateJSON(ctx, from, "assignment", map[string]any{privateMovingKey: &m.private.MovingFrom})
}

// movingValue is MovingFrom as SavePrivateJSON takes it: nil removes the key.
func (p privateState) movingValue() any {
	if p.MovingFrom == nil {
		return nil
	}
	return p.MovingFrom
}
