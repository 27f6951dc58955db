package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// privateState is what the rollout keeps in Terraform's private state: stored with the resource,
// passed back to the provider, never shown in a plan. It holds the per-cluster detail that plans
// are worked out from, so that the attributes a reviewer reads (`summary`, `attention`, `waves`)
// stay the size of the change, not of the fleet.
type privateState struct {
	// Clusters are the eligible picked clusters as the last refresh or apply read them.
	Clusters map[string]clusterRecord
	// PlannedWaves are the clusters of each wave the plan showed as counts; apply carries out
	// exactly these. Nil when the plan could not plan the waves (create, other clusters picked).
	PlannedWaves [][]string
	// Leaving are the clusters the rollout no longer picks, as the last refresh or apply read
	// them (delivery.Observation.Leaving): a plan lets go of these and only these.
	Leaving []string
	// PlannedLeaving are the clusters the plan showed in `leaving`; apply lets go of exactly
	// those that still leave.
	PlannedLeaving []string
	// MovingFrom is the engine the rollout moves from, until every picked cluster verified on
	// the new one and the old one let go of it (delivery.Service.MovingFrom); nil when it moves
	// from none. Kept here, not only read from the prior `delivery`, since an apply that fails
	// part-way saves the new `delivery` in the state while some clusters are still on the old
	// engine.
	MovingFrom *engineRef
	// Bridged is set once an apply wrote the bridge for joiners (follow_joins) and cleared once it
	// removed it: an apply without follow_joins asks Cluster API's API only when set.
	Bridged *bool
}

// engineRef is an engine as the private state keeps it (fleetresource.EngineRef).
type engineRef = fleetresource.EngineRef

// clusterRecord is one cluster's records, as the last refresh or apply read them.
type clusterRecord struct {
	Revision string         `json:"revision,omitempty"`
	State    delivery.State `json:"state"`
	Backup   string         `json:"backup,omitempty"`
	// Found is, for a records-missing cluster, the objects of the rollout the refresh found
	// there (delivery.ClusterState.Drift), for the plan's reason to hold it back.
	Found []string `json:"found,omitempty"`
}

// Private state keys; values are JSON.
const (
	privateClustersKey = "clusters"
	privateWavesKey    = "planned_waves"
	privateLeavingKey  = "leaving"
	privatePlannedKey  = "planned_leaving"
	privateMovingKey   = "moving_from"
	privateBridgedKey  = "bridged"
)

// movingValue is MovingFrom as SavePrivateJSON takes it: nil removes the key.
func (p privateState) movingValue() any {
	if p.MovingFrom == nil {
		return nil
	}
	return p.MovingFrom
}

// loadMoving reads only MovingFrom from the private state (a refresh keeps it, and nothing else
// of what a plan left there).
func (m *Model) loadMoving(ctx context.Context, from fleetresource.PrivateGetter) diag.Diagnostics {
	return fleetresource.LoadPrivateJSON(ctx, from, "rollout", map[string]any{privateMovingKey: &m.private.MovingFrom})
}

// LoadPrivate reads the private state; a missing key leaves its field nil.
func (m *Model) LoadPrivate(ctx context.Context, from fleetresource.PrivateGetter) diag.Diagnostics {
	return fleetresource.LoadPrivateJSON(ctx, from, "rollout", map[string]any{privateClustersKey: &m.private.Clusters, privateWavesKey: &m.private.PlannedWaves,
		privateLeavingKey: &m.private.Leaving, privatePlannedKey: &m.private.PlannedLeaving, privateMovingKey: &m.private.MovingFrom,
		privateBridgedKey: &m.private.Bridged})
}

// SavePrivate writes the private state; a nil field removes its key.
func (m *Model) SavePrivate(ctx context.Context, to fleetresource.PrivateSetter) diag.Diagnostics {
	return fleetresource.SavePrivateJSON(ctx, to, map[string]any{privateClustersKey: m.private.Clusters, privateWavesKey: m.private.PlannedWaves,
		privateLeavingKey: m.private.Leaving, privatePlannedKey: m.private.PlannedLeaving, privateMovingKey: m.private.movingValue(),
		privateBridgedKey: m.private.Bridged})
}

// summaryOutdated is the summary's state of a cluster verified on another revision than the
// rollout's, beyond delivery's states (stateOf returns it).
const summaryOutdated delivery.State = "outdated"

// Summary keys beyond the states: a skipped cluster, and one its stages leave for later.
const (
	summarySkipped = "skipped"
	// summaryWaiting counts the clusters not on the revision that its stages leave for a later
	// promotion (or in no stage): counted, not listed in `attention`, however many they are.
	summaryWaiting = "waiting"
)

// summarize counts the picked clusters by state and says, for each eligible one not current on
// revision, what is wrong. Skipped clusters are counted; their reasons are in `skipped`. The
// clusters that wait for a later stage (waiting) are counted as such when not current.
func summarize(revision string, obs *delivery.Observation, waiting map[string]bool) (map[string]int64, map[string]string) {
	summary, attention := map[string]int64{}, map[string]string{}
	for name, st := range obs.Clusters {
		state := stateOf(revision, st)
		if waiting[name] && state != delivery.StateCurrent {
			summary[summaryWaiting]++
			continue
		}
		summary[string(state)]++
		if note := attentionNote(revision, state, st); note != "" {
			attention[name] = note
		}
	}
	if n := len(obs.Skipped); n > 0 {
		summary[summarySkipped] = int64(n)
	}
	for name, reason := range obs.LostContact {
		if obs.LostContactRevision == revision {
			attention[name] = "lost contact after revision " + revision + " was applied (the next apply of it needs retry_invalid): " + reason
		}
	}
	return summary, attention
}

// stateOf is a cluster's state as `summary` counts it: delivery's, or outdated for a cluster
// verified on another revision than the rollout's.
func stateOf(revision string, st delivery.ClusterState) delivery.State {
	if st.State == delivery.StateCurrent && st.Revision != revision {
		return summaryOutdated
	}
	return st.State
}

// attentionNote is one line on a cluster that is not current: its state first, then the detail.
func attentionNote(revision string, state delivery.State, st delivery.ClusterState) string {
	runs := "nothing"
	if st.Revision != "" {
		runs = "revision " + st.Revision
	}
	switch state {
	case delivery.StateCurrent:
		return ""
	case summaryOutdated:
		return fmt.Sprintf("outdated: runs %s, not %s", runs, revision)
	case delivery.StateDrifted:
		drift := append([]string{}, st.Drift...)
		sort.Strings(drift)
		if len(drift) == 0 {
			return "drifted: objects of " + runs + " are missing or edited"
		}
		return "drifted: " + shortList(drift)
	case delivery.StateProvisioning:
		return fmt.Sprintf("provisioning: an apply stopped while changing it (it runs %s)", runs)
	case delivery.StatePending:
		return "pending: nothing applied yet"
	case delivery.StateValuesChanged:
		return "values-changed: " + runs + " renders differently for this cluster now: " + shortList(st.Drift)
	case delivery.StateRecordsMissing:
		return delivery.RecordsMissingReason(st.Drift)
	}
	return fmt.Sprintf("%s: runs %s", state, runs)
}

// shortList joins items with "; ", at most a few of them, sorted.
func shortList(items []string) string {
	items = append([]string{}, items...)
	sort.Strings(items)
	const shown = 5
	if len(items) > shown {
		items = append(items[:shown], fmt.Sprintf("and %d more", len(items)-shown))
	}
	return strings.Join(items, "; ")
}
