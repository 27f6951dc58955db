package testbed

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// A kwok workload whose Cluster Cluster API reconciles (WorkloadSpec.ClusterAPI): its Cluster
// carries the managers' watch-filter label, so the fleet's real core manager takes it in (its
// Cluster controller, ClusterCache and ClusterResourceSet controller), and its API server is a
// real kube-apiserver (server-side apply, every kind), unlike CAPD's in-memory ones, which
// serve a few kinds and no server-side apply. No KubeadmControlPlane controller acts on it: the
// stand-in KubeadmControlPlane carries no watch-filter label, and its status, written here, says
// what KCP would once the control plane is up (initialized, available), which Cluster API's
// Cluster controller reads into the Cluster's ControlPlaneInitialized and Available conditions.

// clusterAPIManaged writes, before the Cluster, what Cluster API reads to take it over: the
// kubeconfig Secret (as KubeadmControlPlane writes it before it reports the control plane
// initialized, so that the ClusterCache connects at its first try) and the stand-in
// KubeadmControlPlane with its status.
func (f *Fleet) clusterAPIManaged(ctx context.Context, c client.Client, w *Workload, kubeconfigPath string) error {
	name := w.Spec.Name
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		return fmt.Errorf("cluster %s: kubeconfig: %w", name, err)
	}
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": name + "-kubeconfig", "namespace": f.Namespace,
			"labels": map[string]any{clusterv1.ClusterNameLabel: name},
		},
		"type": string(clusterv1.ClusterSecretType),
		"data": map[string]any{"value": encodeBase64(kubeconfig)},
	}}
	if err := apply(ctx, c, s); err != nil {
		return fmt.Errorf("cluster %s: apply kubeconfig Secret: %w", name, err)
	}
	kcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": controlPlaneGroup + "/v1beta2", "kind": controlPlaneKind,
		"metadata": map[string]any{
			"name": name + "-control-plane", "namespace": f.Namespace,
			"labels": map[string]any{clusterv1.ClusterNameLabel: name},
		},
		"spec": map[string]any{
			"version": "v1.36.3", "replicas": int64(1),
			"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
				"apiGroup": InfrastructureGroup, "kind": "GradualMachineTemplate", "name": "none",
			}}},
		},
	}}
	if err := apply(ctx, c, kcp); err != nil {
		return fmt.Errorf("cluster %s: apply the stand-in KubeadmControlPlane: %w", name, err)
	}
	now := clock.System{}.Now().UTC().Format(time.RFC3339)
	st := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": controlPlaneGroup + "/v1beta2", "kind": controlPlaneKind,
		"metadata": map[string]any{"name": name + "-control-plane", "namespace": f.Namespace},
		"status": map[string]any{
			"initialization": map[string]any{"controlPlaneInitialized": true},
			"version":        "v1.36.3", "replicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1), "upToDateReplicas": int64(1),
			"conditions": []any{map[string]any{"type": clusterv1.AvailableCondition, "status": string(metav1.ConditionTrue), "reason": "Available",
				"message": "", "lastTransitionTime": now}},
		},
	}}
	if err := applyStatus(ctx, c, st); err != nil {
		return fmt.Errorf("cluster %s: the stand-in KubeadmControlPlane's status: %w", name, err)
	}
	return nil
}
