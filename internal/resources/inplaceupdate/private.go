package inplaceupdate

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// fleetPrivate is what the fleet form keeps in Terraform's private state, out of plans: what
// the last refresh read of each picked cluster (the next plan's waves are cut from it), and
// from a plan to its apply, the waves and the preview apply carries out and checks against.
type fleetPrivate struct {
	Clusters     map[string]fleetupdate.ClusterFacts
	PlannedWaves [][]string
	Strategies   fleetupdate.Strategies
}

const (
	privateClustersKey   = "fleet_clusters"
	privateWavesKey      = "planned_waves"
	privateStrategiesKey = "planned_preview"
)

// LoadPrivate reads the private state (see fleetPrivate).
func (m *Model) LoadPrivate(ctx context.Context, from fleetresource.PrivateGetter) diag.Diagnostics {
	return fleetresource.LoadPrivateJSON(ctx, from, "in-place update", map[string]any{
		privateClustersKey: &m.private.Clusters, privateWavesKey: &m.private.PlannedWaves, privateStrategiesKey: &m.private.Strategies,
	})
}

// SavePrivate writes the private state; what is nil is removed.
func (m *Model) SavePrivate(ctx context.Context, to fleetresource.PrivateSetter) diag.Diagnostics {
	return fleetresource.SavePrivateJSON(ctx, to, map[string]any{
		privateClustersKey: m.private.Clusters, privateWavesKey: m.private.PlannedWaves, privateStrategiesKey: m.private.Strategies,
	})
}
