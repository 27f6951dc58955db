package blame

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func ready(name string) NodeState { return NodeState{Name: name, UID: name + "-1", Ready: "True"} }

func with(n NodeState, f func(*NodeState)) NodeState { f(&n); return n }

func notReady(n NodeState) NodeState {
	return with(n, func(n *NodeState) {
		n.Ready, n.Reason, n.Message = "False", "KubeletNotReady", "network plugin not ready"
	})
}

func silent(n NodeState) NodeState {
	return with(n, func(n *NodeState) { n.Ready, n.Reason = "Unknown", "NodeStatusUnknown" })
}

func reading(nodes ...NodeState) GateReading { return GateReading{Nodes: nodes, NodesRead: true} }

// TestGateChange: the gate judges what changed between the reads before and after a cluster's
// change; churn that a cluster autoscaler, a node repair or a spot interruption makes is named,
// never blamed.
func TestGateChange(t *testing.T) {
	n1, n2, n3 := ready("n1"), ready("n2"), ready("n3")
	before := reading(n1, n2, n3)
	spot := labels.SelectorFromSet(labels.Set{"pool": "system"})
	tests := []struct {
		name   string
		before GateReading
		after  GateReading
		policy GatePolicy
		class  Class
		want   []string // in the evidence, or in the notes when not Revision
	}{
		{"nothing changed", before, before, GatePolicy{}, Unknown, nil},
		{"a Node made NotReady by the change", before, reading(notReady(n1), n2, n3), GatePolicy{}, Revision,
			[]string{"n1 Ready is False (KubeletNotReady)", "Ready before the change"}},
		{"a Node joined NotReady (autoscaler)", before, reading(n1, n2, n3, notReady(ready("n4"))), GatePolicy{}, Unknown,
			[]string{"Node n4 joined during the wave, not judged"}},
		{"a Node drained and cordoned (repair)", before, reading(n1, notReady(with(n2, func(n *NodeState) { n.Cordoned = true })), n3), GatePolicy{}, Unknown,
			[]string{"Node n2 was cordoned or is being deleted"}},
		{"a Node being deleted", before, reading(n1, n2, notReady(with(n3, func(n *NodeState) { n.Deleting = true }))), GatePolicy{}, Unknown,
			[]string{"Node n3 was cordoned or is being deleted"}},
		{"a Node deleted", before, reading(n1, n2), GatePolicy{}, Unknown, []string{"Node n3 was deleted during the wave"}},
		{"a Node replaced under its name", before, reading(n1, n2, notReady(with(n3, func(n *NodeState) { n.UID = "n3-2" }))), GatePolicy{}, Unknown,
			[]string{"Node n3 was replaced during the wave"}},
		{"a spot Node lost (kubelet silent)", before, reading(n1, silent(n2), n3), GatePolicy{}, Unknown,
			[]string{"Node n2 Ready is Unknown (NodeStatusUnknown): kubelet stopped posting"}},
		{"every Node silent after the change", before, reading(silent(n1), silent(n2), silent(n3)), GatePolicy{}, Revision,
			[]string{"every Node went silent"}},
		{"within max_unready_nodes", before, reading(notReady(n1), n2, n3), GatePolicy{MaxUnreadyNodes: 1}, Unknown, nil},
		{"beyond max_unready_nodes", before, reading(notReady(n1), notReady(n2), n3), GatePolicy{MaxUnreadyNodes: 1}, Revision,
			[]string{"more than max_unready_nodes 1"}},
		{"a Node the selector leaves out", reading(n1, with(n2, func(n *NodeState) { n.Labels = map[string]string{"pool": "system"} })),
			reading(notReady(n1), with(n2, func(n *NodeState) { n.Labels = map[string]string{"pool": "system"} })), GatePolicy{NodeSelector: spot}, Unknown, nil},
		{"a Node the selector counts", reading(n1, with(n2, func(n *NodeState) { n.Labels = map[string]string{"pool": "system"} })),
			reading(n1, notReady(with(n2, func(n *NodeState) { n.Labels = map[string]string{"pool": "system"} }))), GatePolicy{NodeSelector: spot}, Revision,
			[]string{"n2 Ready is False"}},
		{"Cluster Available lost", before, GateReading{Available: "Cluster condition Available is False (NotAvailable)"}, GatePolicy{}, Revision,
			[]string{"Available is False", "Available before the change"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, notes := GateChange(tt.before, tt.after, tt.policy)
			if v.Class != tt.class {
				t.Fatalf("GateChange = %v (notes %q), want %s", v, notes, tt.class)
			}
			text := v.Rule + ": " + v.Evidence + " | " + strings.Join(notes, " | ")
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("GateChange said %q, want %q in it", text, w)
				}
			}
		})
	}
}

func TestGateBefore(t *testing.T) {
	n1, n2 := ready("n1"), ready("n2")
	tests := []struct {
		name   string
		r      GateReading
		policy GatePolicy
		want   string // "" healthy
	}{
		{"healthy", reading(n1, n2), GatePolicy{}, ""},
		{"no Nodes read (Flux)", GateReading{}, GatePolicy{}, ""},
		{"a Node NotReady", reading(notReady(n1), n2), GatePolicy{}, "Node n1 Ready is False (KubeletNotReady)"},
		{"a cordoned Node NotReady (being drained)", reading(notReady(with(n1, func(n *NodeState) { n.Cordoned = true })), n2), GatePolicy{}, ""},
		{"within the budget", reading(notReady(n1), n2), GatePolicy{MaxUnreadyNodes: 1}, ""},
		{"a Node with no Ready condition", reading(with(n1, func(n *NodeState) { n.Ready = "" }), n2), GatePolicy{}, "n1 has no Ready condition"},
		{"Cluster not Available", GateReading{Available: "Cluster condition Available is False"}, GatePolicy{}, "Available is False"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := GateBefore(tt.r, tt.policy)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("GateBefore = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCorroborate: a Node problem that shows on clusters the revision has not reached is the
// fleet's, not the revision's.
func TestCorroborate(t *testing.T) {
	nodeVerdict := Verdict{Class: Revision, Rule: "cluster gate: Node became NotReady", Evidence: "Node n1 Ready is False"}
	tests := []struct {
		name      string
		v         Verdict
		untouched map[string]string
		class     Class
	}{
		{"untouched clusters healthy: the revision's", nodeVerdict, map[string]string{"c3": "", "c4": ""}, Revision},
		{"one untouched cluster healthy: the revision's", nodeVerdict, map[string]string{"c3": "Node m1 Ready is False", "c4": ""}, Revision},
		{"every untouched cluster unhealthy: the fleet's", nodeVerdict, map[string]string{"c3": "Node m1 Ready is False", "c4": "Node k2 Ready is False"}, Infrastructure},
		{"none left to compare with: the revision's", nodeVerdict, nil, Revision},
		{"not a Node verdict: unchanged", Verdict{Class: Revision, Rule: "object failed"}, map[string]string{"c3": "Node m1 Ready is False"}, Revision},
		{"silent Nodes everywhere: the fleet's", Verdict{Class: Revision, Rule: "cluster gate: every Node went silent"}, map[string]string{"c3": "Node m1 Ready is Unknown"}, Infrastructure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Corroborate(tt.v, tt.untouched)
			if got.Class != tt.class {
				t.Errorf("Corroborate = %v, want %s", got, tt.class)
			}
			if tt.class == Infrastructure && !strings.Contains(got.Evidence, "clusters the revision has not reached: c3") {
				t.Errorf("Corroborate evidence %q does not name the untouched clusters", got.Evidence)
			}
		})
	}
}
