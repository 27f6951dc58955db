package testbed

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MachineDeploymentSpec describes a MachineDeployment the test bed writes for a workload, with
// its Machines as CAPI's controllers would have made them (no controllers run).
type MachineDeploymentSpec struct {
	// Cluster is the workload (CAPI Cluster name) the machines belong to.
	Cluster string
	// Name of the MachineDeployment; its Machines, GradualMachines and KubeadmConfigs are
	// <name>-<i>.
	Name string
	// Replicas is the number of Machines, at most the workload's Nodes: Machine i's
	// status.nodeRef is the fake Node kwok-node-<i>.
	Replicas int
	// Version is spec.version of the template and of every Machine; default KubeletVersion.
	Version string
	// Labels are extra labels of the MachineDeployment (for a machine_deployment_selector).
	Labels map[string]string
}

// Machine groups and kinds the test bed writes.
const (
	bootstrapGroup    = "bootstrap.cluster.x-k8s.io"
	capiAPIVersion    = "cluster.x-k8s.io/v1beta2"
	kubeadmAPIVersion = bootstrapGroup + "/v1beta2"
	infraAPIVersion   = InfrastructureGroup + "/v1beta1"
)

// AddMachineDeployment writes a MachineDeployment (with its GradualMachineTemplate and
// KubeadmConfigTemplate) and spec.Replicas Machines, each with a GradualMachine and a
// KubeadmConfig, status.nodeRef on a fake Node of the workload and phase Running. It returns
// the Machine names.
func (f *Fleet) AddMachineDeployment(ctx context.Context, spec MachineDeploymentSpec) ([]string, error) {
	w, err := f.workload(spec.Cluster)
	if err != nil {
		return nil, err
	}
	nodes := w.Spec.Nodes
	if nodes == 0 {
		nodes = defaultNodes
	}
	// A Cluster of the scale bed that shares another's control plane has that one's Nodes.
	if !w.Spec.hasControlPlane() && (w.Spec.SharesWith == "" || w.Spec.NoKubeconfig || w.Spec.ExecKubeconfig) {
		return nil, fmt.Errorf("workload %s has no control plane, so no Nodes for Machines", spec.Cluster)
	}
	if spec.Name == "" || spec.Replicas < 1 || spec.Replicas > nodes {
		return nil, fmt.Errorf("machine deployment %q: want a name and 1..%d replicas (the workload's Nodes), got %d", spec.Name, nodes, spec.Replicas)
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
		"cluster.x-k8s.io/cluster-name":    spec.Cluster,
		"cluster.x-k8s.io/deployment-name": spec.Name,
	}
	mdLabels := maps.Clone(labels)
	for k, v := range spec.Labels {
		mdLabels[k] = v
	}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": infraAPIVersion, "kind": "GradualMachineTemplate",
			"metadata": map[string]any{"name": spec.Name, "namespace": ns},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"size": "small"}}},
		}},
		{Object: map[string]any{
			"apiVersion": kubeadmAPIVersion, "kind": "KubeadmConfigTemplate",
			"metadata": map[string]any{"name": spec.Name, "namespace": ns},
			"spec":     map[string]any{"template": map[string]any{"spec": bootstrapSpec()}},
		}},
		{Object: map[string]any{
			"apiVersion": capiAPIVersion, "kind": "MachineDeployment",
			"metadata": map[string]any{"name": spec.Name, "namespace": ns, "labels": mdLabels},
			"spec": map[string]any{
				"clusterName": spec.Cluster,
				"replicas":    int64(spec.Replicas),
				"selector":    map[string]any{"matchLabels": labels},
				// Rolled out without surge, as in-place updates need (with maxSurge > 0 Cluster API
				// creates new Machines first and replaces old ones even when an extension covers
				// them), so an in-place plan of these Machines previews them in place.
				"rollout": map[string]any{"strategy": map[string]any{"type": "RollingUpdate",
					"rollingUpdate": map[string]any{"maxSurge": int64(0), "maxUnavailable": int64(1)}}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"clusterName":       spec.Cluster,
						"version":           spec.Version,
						"bootstrap":         map[string]any{"configRef": objectRef(bootstrapGroup, "KubeadmConfigTemplate", spec.Name)},
						"infrastructureRef": objectRef(InfrastructureGroup, "GradualMachineTemplate", spec.Name),
					},
				},
			},
		}},
	}
	return writeMachines(ctx, c, "machine deployment "+ns+"/"+spec.Name, machineSet{
		namespace: ns, cluster: spec.Cluster, name: spec.Name, replicas: spec.Replicas, version: spec.Version, labels: labels,
	}, objs)
}

// machineSet is a group of Machines the test bed writes as CAPI would have made them: Machine
// <name>-<i>, with a GradualMachine and a KubeadmConfig of the same name, on fake Node
// kwok-node-<firstNode+i>.
type machineSet struct {
	namespace, cluster, name, version string
	replicas, firstNode               int
	labels                            map[string]any
}

// writeMachines applies objs (what owns the machines, if anything) and the set's machines,
// then writes the Machines' status (phase Running, nodeRef) through the status subresource.
// It returns the Machine names.
func writeMachines(ctx context.Context, c client.Client, what string, set machineSet, objs []*unstructured.Unstructured) ([]string, error) {
	ns := set.namespace
	var names []string
	var statuses []*unstructured.Unstructured
	for i := range set.replicas {
		name := fmt.Sprintf("%s-%d", set.name, i)
		names = append(names, name)
		objs = append(objs,
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": infraAPIVersion, "kind": "GradualMachine",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": set.labels},
				"spec":     map[string]any{"providerID": "gradual://" + set.cluster + "/" + name, "size": "small"},
			}},
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": kubeadmAPIVersion, "kind": "KubeadmConfig",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": set.labels},
				"spec":     bootstrapSpec(),
			}},
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": capiAPIVersion, "kind": "Machine",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": set.labels},
				"spec": map[string]any{
					"clusterName":       set.cluster,
					"version":           set.version,
					"providerID":        "gradual://" + set.cluster + "/" + name,
					"bootstrap":         map[string]any{"configRef": objectRef(bootstrapGroup, "KubeadmConfig", name)},
					"infrastructureRef": objectRef(InfrastructureGroup, "GradualMachine", name),
				},
			}},
		)
		statuses = append(statuses, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": capiAPIVersion, "kind": "Machine",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"status": map[string]any{
				"phase":   "Running",
				"nodeRef": map[string]any{"name": fmt.Sprintf("kwok-node-%d", set.firstNode+i)},
			},
		}})
	}
	for _, o := range objs {
		if err := apply(ctx, c, o); err != nil {
			return nil, fmt.Errorf("%s: apply %s %s: %w", what, o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range statuses {
		if err := applyStatus(ctx, c, o); err != nil {
			return nil, fmt.Errorf("%s: status of Machine %s: %w", what, o.GetName(), err)
		}
	}
	return names, nil
}

// objectRef is a CAPI contract reference (apiGroup, kind, name).
func objectRef(group, kind, name string) map[string]any {
	return map[string]any{"apiGroup": group, "kind": kind, "name": name}
}

// bootstrapSpec is a small kubeadm bootstrap config spec with fields an update may change.
func bootstrapSpec() map[string]any {
	return map[string]any{
		"files":              []any{map[string]any{"path": "/etc/gradual/motd", "content": "hello"}},
		"preKubeadmCommands": []any{"echo gradual"},
	}
}
