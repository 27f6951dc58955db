package delivery

import (
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// Held implements engine.Holder: right before each wave it judges again whether a cluster's
// maintenance windows (its own and the rollout's, fleet.Hold) still let its change start. A
// window open when apply read the fleet may have closed while earlier waves ran and baked; such
// a cluster is held back, never changed outside its window. Pauses were judged when apply read
// the fleet and do not change with time. Through Flux, a cluster whose Kustomization was
// suspended since the plan is held too: Flux would not act on the new pin. Last, the cluster's
// gates are read (gate.go): one unhealthy before its change is held back, not blamed on the
// revision.
func (w *world) Held(target string) string {
	if c, ok := w.clusters[target]; ok {
		if reason := c.HoldReason(w.hold, w.svc.clock.Now()); reason != "" {
			return reason
		}
	}
	if _, ok := w.clusters[target]; ok {
		if reason := w.engine.held(target); reason != "" {
			return reason
		}
	}
	return w.gateBefore(target)
}

// heldReadTimeout bounds Held's read of a Kustomization.
const heldReadTimeout = 10 * time.Second

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
