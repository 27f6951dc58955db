package testbed

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// InMemoryCluster describes a CAPI cluster on CAPD's in-memory backend, for tests against the
// real Cluster API controllers (Options.ClusterAPI).
type InMemoryCluster struct {
	Namespace, Name string
	// ControlPlaneVersion and WorkerVersion are the KubeadmControlPlane's and the
	// MachineDeployment's Kubernetes versions.
	ControlPlaneVersion, WorkerVersion string
	// Labels go on the Cluster (e.g. for a selector), beside the watch-filter label.
	Labels map[string]string
	// InPlaceRollout gives the MachineDeployment maxSurge 0 / maxUnavailable 1, so that Cluster
	// API updates its machine in place when an extension covers the change (with its default
	// maxSurge 1 it creates a new Machine first and deletes the old one).
	InPlaceRollout bool
}

// Objects are the cluster's objects: a DevCluster, a one-replica KubeadmControlPlane and a
// one-replica MachineDeployment with DevMachineTemplates and a KubeadmConfigTemplate. The
// MachineDeployment has no selector (the webhook defaults it). Every object, and the templates'
// metadata, carries the managers' watch-filter label. Provisioning delays are short, so the
// cluster is up in seconds.
func (c InMemoryCluster) Objects() ([]*unstructured.Unstructured, error) {
	inMemoryMachine := `
      backend:
        inMemory:
          vm: {provisioning: {startupDuration: 1s}}
          node: {provisioning: {startupDuration: 1s}}
          apiServer: {provisioning: {startupDuration: 1s}}
          etcd: {provisioning: {startupDuration: 1s}}`
	rollout := ""
	if c.InPlaceRollout {
		rollout = `
  rollout:
    strategy:
      type: RollingUpdate
      rollingUpdate: {maxSurge: 0, maxUnavailable: 1}`
	}
	manifests := fmt.Sprintf(`
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevCluster
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {cluster.x-k8s.io/watch-filter: %[6]s}
  # CAPD v1.14.2 panics on a DevCluster without annotations (it writes one into a nil map);
  # ClusterClass-built DevClusters always have some.
  annotations: {gradual.dev/testbed: in-memory}
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: %[1]s-control-plane, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[6]s}}
spec:
  template:
    spec:%[5]s
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: %[1]s-md-0, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[6]s}}
spec:
  template:
    spec:%[5]s
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: %[1]s-md-0, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[6]s}}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          criSocket: unix:///var/run/containerd/containerd.sock
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: %[1]s-control-plane, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[6]s}}
spec:
  replicas: 1
  version: %[3]s
  machineTemplate:
    metadata:
      labels: {cluster.x-k8s.io/watch-filter: %[6]s}
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: %[1]s-control-plane}
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs: [localhost, 127.0.0.1]
    initConfiguration:
      nodeRegistration:
        criSocket: unix:///var/run/containerd/containerd.sock
    joinConfiguration:
      nodeRegistration:
        criSocket: unix:///var/run/containerd/containerd.sock
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: %[1]s, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[6]s}}
spec:
  clusterNetwork:
    services: {cidrBlocks: [10.128.0.0/12]}
    pods: {cidrBlocks: [192.168.0.0/16]}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: %[1]s}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: %[1]s-control-plane}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: %[1]s-md-0, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[6]s}}
spec:
  clusterName: %[1]s
  replicas: 1%[7]s
  template:
    metadata:
      labels: {cluster.x-k8s.io/watch-filter: %[6]s}
    spec:
      clusterName: %[1]s
      version: %[4]s
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: %[1]s-md-0}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: %[1]s-md-0}
`, c.Name, c.Namespace, c.ControlPlaneVersion, c.WorkerVersion, inMemoryMachine, ClusterAPIWatchFilter, rollout)
	objs, err := decodeYAML([]byte(manifests))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "Cluster" || len(c.Labels) == 0 {
			continue
		}
		l := o.GetLabels()
		for k, v := range c.Labels {
			l[k] = v
		}
		o.SetLabels(l)
	}
	return objs, nil
}
