package testbed

import (
	"context"
	"fmt"
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
	return writeMachines(ctx, c, "control plane "+ns+"/"+spec.Name, machineSet{
		namespace: ns, cluster: spec.Cluster, name: spec.Name, replicas: spec.Replicas,
		firstNode: spec.FirstNode, version: spec.Version, labels: labels,
	}, nil)
}
