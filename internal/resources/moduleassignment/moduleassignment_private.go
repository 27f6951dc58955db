package moduleassignment

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/lifecycle"
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
}

// Private state keys; values are JSON.
const (
	privateClustersKey = "clusters"
	privateWavesKey    = "planned_waves"
)

// LoadPrivate reads the private state; a missing key leaves its field nil.
func (m *Model) LoadPrivate(ctx context.Context, from lifecycle.PrivateGetter) diag.Diagnostics {
	var diags diag.Diagnostics
	if from == nil {
		return diags
	}
	for key, into := range map[string]any{privateClustersKey: &m.private.Clusters, privateWavesKey: &m.private.PlannedWaves} {
		raw, d := from.GetKey(ctx, key)
		diags.Append(d...)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, into); err != nil {
			diags.AddError("Unreadable Private State", fmt.Sprintf("The assignment's private state %q cannot be read (%v); the next refresh rewrites it.", key, err))
		}
	}
	return diags
}

// SavePrivate writes the private state; a nil field removes its key.
func (m *Model) SavePrivate(ctx context.Context, to lifecycle.PrivateSetter) diag.Diagnostics {
	var diags diag.Diagnostics
	if to == nil {
		return diags
	}
	var clusters, waves []byte
	if m.private.Clusters != nil {
		clusters, _ = json.Marshal(m.private.Clusters)
	}
	if m.private.PlannedWaves != nil {
		waves, _ = json.Marshal(m.private.PlannedWaves)
	}
	diags.Append(to.SetKey(ctx, privateClustersKey, clusters)...)
	diags.Append(to.SetKey(ctx, privateWavesKey, waves)...)
	return diags
}
