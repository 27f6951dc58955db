package fleet

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func node(name string, ready corev1.ConditionStatus, reason string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason, Message: "first line\nsecond"}}
	}
	return n
}

func TestNodesProblem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{"all ready", []*corev1.Node{node("n1", corev1.ConditionTrue, ""), node("n2", corev1.ConditionTrue, "")}, nil},
		{"none", nil, nil},
		{"one not ready", []*corev1.Node{node("n1", corev1.ConditionTrue, ""), node("n2", corev1.ConditionFalse, "KubeletNotReady")},
			[]string{"Node n2 Ready is False (KubeletNotReady): first line"}},
		{"unknown and no condition", []*corev1.Node{node("n1", corev1.ConditionUnknown, "NodeStatusUnknown"), node("n2", "", "")},
			[]string{"n1 Ready is Unknown (NodeStatusUnknown)", "n2 has no Ready condition"}},
		{"many", []*corev1.Node{node("a", "", ""), node("b", "", ""), node("c", "", ""), node("d", "", ""), node("e", "", "")},
			[]string{"(and 2 more)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			for _, n := range tc.nodes {
				b = b.WithObjects(n)
			}
			got, err := NodesProblem(context.Background(), b.Build())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil && got != "" {
				t.Errorf("NodesProblem = %q, want healthy", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("NodesProblem = %q, want %q in it", got, w)
				}
			}
		})
	}
}

func TestAvailableProblem(t *testing.T) {
	mk := func(conds ...metav1.Condition) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "c1"}, Status: clusterv1.ClusterStatus{Conditions: conds}}
	}
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		want    string
	}{
		{"available", mk(metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue}), ""},
		{"no condition: no signal", mk(), ""},
		{"not available", mk(metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "* WorkersAvailable: 0 of 3"}),
			"Cluster condition Available is False (NotAvailable): * WorkersAvailable: 0 of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Management{Client: fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(tc.cluster).Build(), apiVersion: clusterv1.GroupVersion.Version}
			got, err := m.AvailableProblem(context.Background(), "fleet", "c1")
			if err != nil || got != tc.want {
				t.Errorf("AvailableProblem = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
