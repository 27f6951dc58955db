package delivery

import (
	"cmp"
	"slices"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// RecordedTargets are the engine's targets as a saved state recorded the clusters (their
// states, and the reasons the others were skipped), for a plan that reuses the refresh before
// it instead of reading the fleet again. Observe builds them from live records; this is the only
// other place targets are made.
//
// A state records that a revision was in flight on a cluster, not which: any revision but the
// desired one plans the same (applied again, or restored first), so an interrupted cluster gets
// a placeholder provisioning revision. A skipped cluster that also has a state is eligible.
func RecordedTargets(clusters map[string]ClusterState, skipped map[string]string) []engine.Target {
	targets := make([]engine.Target, 0, len(clusters)+len(skipped))
	for name, st := range clusters {
		rec := engine.TargetRecord{Current: st.Revision, Backup: st.Backup}
		if st.State == StateProvisioning {
			rec.Provisioning = "(interrupted)"
		}
		targets = append(targets, engine.Target{Name: name, Record: rec, Drifted: st.State == StateDrifted || st.State == StateValuesChanged})
	}
	for name, reason := range skipped {
		if _, eligible := clusters[name]; !eligible {
			targets = append(targets, engine.Target{Name: name, SkipReason: reason})
		}
	}
	slices.SortFunc(targets, func(a, b engine.Target) int { return cmp.Compare(a.Name, b.Name) })
	return targets
}
