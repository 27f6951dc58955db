package updateext

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagementNodes finds a machine's Node the way a real extension would: the Machine in the
// management cluster names its cluster (spec.clusterName) and Node (status.nodeRef); the
// cluster's <name>-kubeconfig Secret reaches the workload cluster.
type ManagementNodes struct {
	// Client reads Machines and Secrets in the management cluster; its scheme must know
	// CAPI core v1beta2 (testbed.Scheme does).
	Client client.Client

	mu      sync.Mutex
	clients map[string]kubernetes.Interface // "namespace/cluster" -> workload client
}

// SetKubeletVersion patches status.nodeInfo.kubeletVersion of the machine's Node. kwok keeps
// a Node's nodeInfo once it is Ready (its node-initialize stage only fills fields that are
// empty, and only for Nodes not yet Ready), so the patched version stays.
func (n *ManagementNodes) SetKubeletVersion(ctx context.Context, namespace, machine, version string) error {
	var m clusterv1.Machine
	if err := n.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: machine}, &m); err != nil {
		return fmt.Errorf("get Machine %s/%s: %w", namespace, machine, err)
	}
	if m.Status.NodeRef.Name == "" {
		return fmt.Errorf("machine %s/%s has no status.nodeRef", namespace, machine)
	}
	cs, err := n.workload(ctx, namespace, m.Spec.ClusterName)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": version}}})
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, m.Status.NodeRef.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "gradual-update-extension"}, "status"); err != nil {
		return fmt.Errorf("cluster %s/%s: patch Node %s: %w", namespace, m.Spec.ClusterName, m.Status.NodeRef.Name, err)
	}
	return nil
}

func (n *ManagementNodes) workload(ctx context.Context, namespace, cluster string) (kubernetes.Interface, error) {
	key := namespace + "/" + cluster
	n.mu.Lock()
	defer n.mu.Unlock()
	if cs, ok := n.clients[key]; ok {
		return cs, nil
	}
	var secret corev1.Secret
	if err := n.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: cluster + "-kubeconfig"}, &secret); err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig Secret: %w", key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig: %w", key, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", key, err)
	}
	if n.clients == nil {
		n.clients = map[string]kubernetes.Interface{}
	}
	n.clients[key] = cs
	return cs, nil
}
