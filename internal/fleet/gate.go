package fleet

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
)

// Cluster gates: signals of a cluster's own health, beyond the objects a rollout applies, that
// delivery reads before a cluster's wave and again when it verifies the change: the CAPI
// Cluster's Available condition and every Node of the workload cluster. Reading is here; judging
// a change between two reads is blame's (blame.GateChange).

// AvailableProblem reads the Cluster's Available condition in the management cluster: "" when it
// is True or when the Cluster has none (a CAPI contract before v1beta2 conditions, or a provider
// that does not set it: no signal, nothing to judge), otherwise what the condition says.
func (m *Management) AvailableProblem(ctx context.Context, namespace, name string) (string, error) {
	version, err := m.ClusterAPIVersion(ctx)
	if err != nil {
		return "", err
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	var conds []metav1.Condition
	if version == clusterv1.GroupVersion.Version {
		var c clusterv1.Cluster
		if err := m.Client.Get(ctx, key, &c); err != nil {
			return "", err
		}
		conds = c.Status.Conditions
	} else {
		var c clusterv1beta1.Cluster
		if err := m.Client.Get(ctx, key, &c); err != nil {
			return "", err
		}
		if c.Status.V1Beta2 != nil {
			conds = c.Status.V1Beta2.Conditions
		}
	}
	return availableProblem(conds), nil
}

func availableProblem(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type != clusterv1.AvailableCondition || c.Status == metav1.ConditionTrue {
			continue
		}
		return "Cluster condition Available is " + describe(string(c.Status), c.Reason, c.Message)
	}
	return ""
}

// Nodes reads every Node of a workload cluster (c) as a cluster gate judges it
// (blame.GateBefore, blame.GateChange).
func Nodes(ctx context.Context, c client.Client) ([]blame.NodeState, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, err
	}
	out := make([]blame.NodeState, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		s := blame.NodeState{Name: n.Name, UID: string(n.UID), Labels: n.Labels,
			Cordoned: n.Spec.Unschedulable, Deleting: n.DeletionTimestamp != nil}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				s.Ready, s.Reason, s.Message = string(c.Status), c.Reason, c.Message
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func describe(status, reason, message string) string {
	out := status
	if reason != "" {
		out += " (" + reason + ")"
	}
	if message != "" {
		out += ": " + strings.TrimSpace(strings.SplitN(message, "\n", 2)[0])
	}
	return out
}
