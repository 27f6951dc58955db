package blame

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Cluster gates (verify.cluster_gates) judge change, not state: what a gate reads after a
// cluster's change is compared with what it read before it. A cluster autoscaler, a node repair
// or a spot interruption changes Nodes every day; only a change the revision could have made
// counts against it.
//
//   - A Node that was Ready before the change, is still there (same UID), is not cordoned and not
//     being deleted, and whose kubelet now reports Ready False, is evidence against the revision.
//   - A Node that joined during the wave, was cordoned, drained, deleted or replaced, is not
//     judged; the verdict's notes name it.
//   - A Node whose kubelet stopped posting (Ready Unknown) is a lost node (a spot interruption, a
//     host failure) and is not judged, unless every Node that was judged Ready before went
//     silent: a whole cluster's kubelets losing their API server right after the change is the
//     change's doing (a broken CNI or network policy).
//   - The CAPI Cluster's Available condition True before and not after is evidence.
//   - Up to GatePolicy.MaxUnreadyNodes judged Nodes may be unready, before and after.
//   - A Node verdict is checked against clusters the revision has not reached yet
//     (Corroborate): a problem that shows on them too is the fleet's, not the revision's.

// NodeState is one Node as a gate read it.
type NodeState struct {
	Name, UID string
	Labels    map[string]string
	// Ready is the Ready condition's status ("True", "False", "Unknown"; "" when it has none).
	Ready, Reason, Message string
	// Cordoned is spec.unschedulable; Deleting a set deletionTimestamp.
	Cordoned, Deleting bool
}

func (n NodeState) describe() string {
	if n.Ready == "" {
		return n.Name + " has no Ready condition"
	}
	out := n.Name + " Ready is " + n.Ready
	if n.Reason != "" {
		out += " (" + n.Reason + ")"
	}
	if n.Message != "" {
		out += ": " + firstLine(n.Message)
	}
	return out
}

// GateReading is one read of a cluster's gate.
type GateReading struct {
	// Available is what is wrong with the Cluster's Available condition; "" when it is True or
	// absent.
	Available string
	// Nodes is every Node of the workload cluster; NodesRead is false when they were not read
	// (delivering through Flux, the provider does not reach the workload cluster).
	Nodes     []NodeState
	NodesRead bool
}

// GatePolicy is what a platform team tunes about the Node gate.
type GatePolicy struct {
	// NodeSelector picks the Nodes that count (nil or empty: every Node).
	NodeSelector labels.Selector
	// MaxUnreadyNodes is how many counted Nodes may be unready.
	MaxUnreadyNodes int
}

func (p GatePolicy) counts(n NodeState) bool {
	if n.Cordoned || n.Deleting {
		return false // drained, cordoned for repair or on its way out: its readiness is expected to go
	}
	return p.NodeSelector == nil || p.NodeSelector.Empty() || p.NodeSelector.Matches(labels.Set(n.Labels))
}

// GateBefore judges a reading taken before the change: a reason to hold the cluster back (it is
// unhealthy already, and whatever broke it was not this revision), or "".
func GateBefore(r GateReading, p GatePolicy) string {
	if r.Available != "" {
		return r.Available
	}
	var bad []string
	for _, n := range r.Nodes {
		if p.counts(n) && n.Ready != "True" {
			bad = append(bad, n.describe())
		}
	}
	if len(bad) <= p.MaxUnreadyNodes {
		return ""
	}
	return "Node " + list(bad) + unreadyBudget(p)
}

// GateChange judges the reading after the change against the one before it. The verdict is
// Revision when the change is evidence against the revision, Unknown otherwise ("no change the
// revision made"); notes names the Nodes that changed and were not judged, for the wave's
// summary.
func GateChange(before, after GateReading, p GatePolicy) (v Verdict, notes []string) {
	if before.Available == "" && after.Available != "" {
		return Verdict{Class: Revision, Rule: "cluster gate: became unavailable", Evidence: after.Available + " (Available before the change)"}, nil
	}
	was := map[string]NodeState{}
	for _, n := range before.Nodes {
		was[n.Name] = n
	}
	var judgedReady, silent int
	var unready, joined, replaced, left, excused, lost []string
	seen := map[string]bool{}
	for _, n := range after.Nodes {
		seen[n.Name] = true
		prev, ok := was[n.Name]
		switch {
		case !ok:
			joined = append(joined, n.Name)
			continue
		case prev.UID != n.UID:
			replaced = append(replaced, n.Name)
			continue
		case !p.counts(prev):
			continue // not judged before the change either
		case !p.counts(n):
			excused = append(excused, n.Name)
			continue
		case prev.Ready != "True":
			continue // unready before: within the budget GateBefore allowed, not the revision's
		}
		judgedReady++
		switch n.Ready {
		case "True":
		case "Unknown", "":
			silent++
			lost = append(lost, n.describe())
		default:
			unready = append(unready, n.describe())
		}
	}
	for _, n := range before.Nodes {
		if !seen[n.Name] {
			left = append(left, n.Name)
		}
	}
	notes = churnNotes(joined, replaced, left, excused)
	if judgedReady > 0 && silent == judgedReady && silent > p.MaxUnreadyNodes {
		return Verdict{Class: Revision, Rule: "cluster gate: every Node went silent",
			Evidence: "Node " + list(lost) + " (Ready before the change)"}, notes
	}
	if len(lost) > 0 {
		notes = append(notes, "Node "+list(lost)+": kubelet stopped posting (a lost node), not judged")
	}
	if len(unready) > p.MaxUnreadyNodes {
		return Verdict{Class: Revision, Rule: "cluster gate: Node became NotReady",
			Evidence: "Node " + list(unready) + " (Ready before the change)" + unreadyBudget(p)}, notes
	}
	return Verdict{Class: Unknown, Rule: "no change the revision made"}, notes
}

func churnNotes(joined, replaced, left, excused []string) []string {
	var notes []string
	add := func(names []string, what string) {
		if len(names) > 0 {
			sort.Strings(names)
			notes = append(notes, fmt.Sprintf("Node %s %s during the wave, not judged", list(names), what))
		}
	}
	add(joined, "joined")
	add(replaced, "was replaced")
	add(left, "was deleted")
	add(excused, "was cordoned or is being deleted")
	return notes
}

func unreadyBudget(p GatePolicy) string {
	if p.MaxUnreadyNodes == 0 {
		return ""
	}
	return fmt.Sprintf(" (more than max_unready_nodes %d)", p.MaxUnreadyNodes)
}

// list joins names, at most three of them, saying how many more there are.
func list(items []string) string {
	items = append([]string(nil), items...)
	sort.Strings(items)
	const shown = 3
	more := ""
	if len(items) > shown {
		more = fmt.Sprintf(" (and %d more)", len(items)-shown)
		items = items[:shown]
	}
	return strings.Join(items, "; Node ") + more
}

// Corroborate weighs a gate's Node verdict against clusters the revision has not reached yet,
// read at the same time: untouched maps each one sampled to what its gate finds wrong now ("":
// healthy). When every one sampled is unhealthy too, whatever made the Nodes unready is not the
// revision (it never ran there): the verdict is the infrastructure's, and says so. Other
// verdicts, and a sample with any healthy cluster or none at all, are returned as they are.
func Corroborate(v Verdict, untouched map[string]string) Verdict {
	if v.Class != Revision || !strings.HasPrefix(v.Rule, "cluster gate: Node") && v.Rule != "cluster gate: every Node went silent" || len(untouched) == 0 {
		return v
	}
	names := make([]string, 0, len(untouched))
	for name, problem := range untouched {
		if problem == "" {
			return v
		}
		names = append(names, name+" ("+problem+")")
	}
	sort.Strings(names)
	return Verdict{Class: Infrastructure, Rule: "cluster gate: shows on untouched clusters too",
		Evidence: v.Evidence + "; and on clusters the revision has not reached: " + strings.Join(names, "; ")}
}
