package testbed

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ControlPlaneSpec describes control plane Machines the test bed writes for a workload, as a
// KubeadmControlPlane would have made them (no controllers run, and no KubeadmControlPlane
// object is written: the Machines carry its labels).
type ControlPlaneSpec struct {
	// Cluster is the workload (CAPI Cluster name) the machines belong to.
	Cluster string
	// Name of the control plane; its Machines, GradualMachines and KubeadmConfigs are
	// <name>-<i>.
	Name string
	// Replicas is the number of Machines, at most the workload's Nodes: Machine i's
	// status.nodeRef is the fake Node kwok-node-<FirstNode+i>.
	Replicas int
	// FirstNode is the index of the first Node the Machines run on (so a workload's Nodes can
	// be shared between a control plane and a MachineDeployment).
	FirstNode int
	// Version is spec.version of every Machine; default KubeletVersion.
	Version string
}

// AddControlPlane writes spec.Replicas control plane Machines, labelled as CAPI labels a
// KubeadmControlPlane's (cluster.x-k8s.io/control-plane-name=<name> and
// cluster.x-k8s.io/control-plane=""), each with a GradualMachine and a KubeadmConfig,
// status.nodeRef on a fake Node of the workload and phase Running. It returns the Machine names.
func (f *Fleet) AddControlPlane(ctx context.Context, spec ControlPlaneSpec) ([]string, error) {
	w, err := f.workload(spec.Cluster)
	if err != nil {
		return nil, err
	}
	nodes := w.Spec.Nodes
	if nodes == 0 {
		nodes = defaultNodes
	}
	if !w.Spec.hasControlPlane() {
		return nil, fmt.Errorf("workload %s has no control plane, so no Nodes for Machines", spec.Cluster)
	}
	if spec.Name == "" || spec.Replicas < 1 || spec.FirstNode < 0 || spec.FirstNode+spec.Replicas > nodes {
		return nil, fmt.Errorf("control plane %q: want a name and 1..%d replicas from node %d (the workload has %d Nodes), got %d",
			spec.Name, nodes-spec.FirstNode, spec.FirstNode, nodes, spec.Replicas)
	}
	if spec.Version == "" {
		spec.Version = KubeletVersion
	}
	c, err := f.ManagementClient()
	if err != nil {
		return nil, err
	}
	ns := f.Namespace
	labels := map[string]any{
		"cluster.x-k8s.io/cluster-name":       spec.Cluster,
		"cluster.x-k8s.io/control-plane-name": spec.Name,
		"cluster.x-k8s.io/control-plane":      "",
	}
	ref := func(group, kind, name string) map[string]any {
		return map[string]any{"apiGroup": group, "kind": kind, "name": name}
	}
	var names []string
	var objs, statuses []*unstructured.Unstructured
	for i := range spec.Replicas {
		name := fmt.Sprintf("%s-%d", spec.Name, i)
		names = append(names, name)
		objs = append(objs,
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": infraAPIVersion, "kind": "GradualMachine",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
				"spec":     map[string]any{"providerID": "gradual://" + spec.Cluster + "/" + name, "size": "small"},
			}},
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": kubeadmAPIVersion, "kind": "KubeadmConfig",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
				"spec":     bootstrapSpec(),
			}},
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": capiAPIVersion, "kind": "Machine",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
				"spec": map[string]any{
					"clusterName":       spec.Cluster,
					"version":           spec.Version,
					"providerID":        "gradual://" + spec.Cluster + "/" + name,
					"bootstrap":         map[string]any{"configRef": ref(bootstrapGroup, "KubeadmConfig", name)},
					"infrastructureRef": ref(InfrastructureGroup, "GradualMachine", name),
				},
			}},
		)
		statuses = append(statuses, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": capiAPIVersion, "kind": "Machine",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"status": map[string]any{
				"phase":   "Running",
				"nodeRef": map[string]any{"name": fmt.Sprintf("kwok-node-%d", spec.FirstNode+i)},
			},
		}})
	}
	for _, o := range objs {
		if err := apply(ctx, c, o); err != nil {
			return nil, fmt.Errorf("control plane %s/%s: apply %s %s: %w", ns, spec.Name, o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range statuses {
		if err := applyStatus(ctx, c, o); err != nil {
			return nil, fmt.Errorf("control plane %s/%s: status of Machine %s: %w", ns, spec.Name, o.GetName(), err)
		}
	}
	return names, nil
}
