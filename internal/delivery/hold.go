package delivery

import (
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// Held implements engine.Holder: right before each wave it judges again whether a cluster's
// maintenance windows (its own and the rollout's, fleet.Hold) still let its change start. A
// window open when apply read the fleet may have closed while earlier waves ran and baked; such
// a cluster is held back, never changed outside its window. Pauses were judged when apply read
// the fleet and do not change with time.
func (w *world) Held(target string) string {
	c, ok := w.clusters[target]
	if !ok {
		return ""
	}
	return c.HoldReason(w.hold, w.svc.clock.Now())
}

// clustersByName indexes the clusters a discovery found.
func clustersByName(found *fleet.Discovery) map[string]fleet.Cluster {
	out := map[string]fleet.Cluster{}
	if found == nil {
		return out
	}
	for _, c := range found.Clusters {
		out[c.Name] = c
	}
	return out
}
