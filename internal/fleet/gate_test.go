package fleet

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
)

func node(name string, ready corev1.ConditionStatus, reason string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason, Message: "first line\nsecond"}}
	}
	return n
}

func TestNodes(t *testing.T) {
	cordoned := node("n3", corev1.ConditionTrue, "")
	cordoned.Spec.Unschedulable = true
	cordoned.Labels = map[string]string{"pool": "spot"}
	b := fake.NewClientBuilder().WithObjects(node("n1", corev1.ConditionTrue, ""), node("n2", corev1.ConditionFalse, "KubeletNotReady"), cordoned, node("n4", "", ""))
	got, err := Nodes(context.Background(), b.Build())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]blame.NodeState{}
	for _, n := range got {
		byName[n.Name] = n
	}
	if len(got) != 4 {
		t.Fatalf("Nodes read %d, want 4: %+v", len(got), got)
	}
	if n := byName["n2"]; n.Ready != "False" || n.Reason != "KubeletNotReady" || !strings.HasPrefix(n.Message, "first line") {
		t.Errorf("n2 = %+v, want Ready False (KubeletNotReady)", n)
	}
	if n := byName["n3"]; !n.Cordoned || n.Ready != "True" || n.Labels["pool"] != "spot" {
		t.Errorf("n3 = %+v, want cordoned, Ready, labelled", n)
	}
	if n := byName["n4"]; n.Ready != "" {
		t.Errorf("n4 = %+v, want no Ready condition", n)
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
