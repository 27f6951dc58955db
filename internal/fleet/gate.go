package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster gates: signals of a cluster's own health, beyond the objects a rollout applies, that
// delivery reads before a cluster's wave and again when it verifies the change: the CAPI
// Cluster's Available condition and the Ready condition of every Node of the workload cluster.

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

// NodesProblem lists the Nodes of a workload cluster (c) whose Ready condition is not True,
// with what it says; "" when every Node is Ready (or there is none).
func NodesProblem(ctx context.Context, c client.Client) (string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return "", err
	}
	var bad []string
	for _, n := range nodes.Items {
		if p := nodeProblem(n); p != "" {
			bad = append(bad, p)
		}
	}
	if len(bad) == 0 {
		return "", nil
	}
	sort.Strings(bad)
	const shown = 3
	more := ""
	if len(bad) > shown {
		more = fmt.Sprintf(" (and %d more)", len(bad)-shown)
		bad = bad[:shown]
	}
	return "Node " + strings.Join(bad, "; Node ") + more, nil
}

func nodeProblem(n corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return n.Name + " Ready is " + describe(string(c.Status), c.Reason, c.Message)
		}
	}
	return n.Name + " has no Ready condition"
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
