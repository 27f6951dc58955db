package rollout

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// pathPaused is the `paused` attribute.
var pathPaused = path.Root("paused")

// pausedAttribute is `paused`: the whole rollout held, as a reviewed change of one line.
func pausedAttribute() schema.BoolAttribute {
	return schema.BoolAttribute{
		// No default: a state from before `paused` existed holds null, and a default would
		// show every such rollout as changed after an upgrade of the provider.
		Optional: true,
		MarkdownDescription: "Hold the whole rollout: while `true`, a plan reads no cluster and plans no wave and no cluster " +
			"leaving (it says so in a `Rollout Paused` warning), and apply changes no cluster, only saving the configuration. " +
			"Clusters keep what they run. Setting it back to `false` plans the rollout from where it stands. A destroy still " +
			"removes the rollout. To hold out single clusters instead, annotate their Cluster `gradual.dev/paused: \"<reason>\"`. " +
			"Unset is `false`.",
	}
}

// isPaused reports whether the configuration holds the whole rollout.
func (m *Model) isPaused() bool {
	return !m.Paused.IsNull() && !m.Paused.IsUnknown() && m.Paused.ValueBool()
}

// planPaused is the plan of a paused rollout: no wave, no cluster let go of, the computed
// attributes as the last refresh read them (unknown on create, filled with empty values by
// apply), and a warning that says so.
func (m *Model) planPaused(prior *Model, diags *diag.Diagnostics) {
	m.private.PlannedWaves, m.private.PlannedLeaving = nil, nil
	if prior != nil {
		m.copyComputed(prior)
	} else {
		m.markOutcomeUnknown()
		m.setWaves(engine.Plan{})
		m.setLeaving(nil)
	}
	diags.AddAttributeWarning(pathPaused, "Rollout Paused", fmt.Sprintf(
		"paused = true: this plan changes no cluster and lets go of none; apply only saves the configuration (revision %s "+
			"goes nowhere). Set paused = false, or remove it, to plan the rollout again.", m.Revision.ValueString()))
}

// applyPaused is the apply of a paused rollout: nothing is run; the attributes the plan left
// unknown (on create) get empty values.
func (r *rolloutResource) applyPaused(ctx context.Context, plan *Model, diags *diag.Diagnostics) bool {
	plan.private.PlannedWaves, plan.private.PlannedLeaving = nil, nil
	diags.Append(plan.settleOutcome(ctx, nil, nil)...)
	plan.settleBridgeUnread()
	diags.AddAttributeWarning(pathPaused, "Rollout Paused", "paused = true: no cluster was changed.")
	return true
}
