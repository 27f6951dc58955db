package testbed

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// InMemoryClusterClass is a ClusterClass named name for CAPD's in-memory backend, with its
// templates (named after it), modelled on the in-memory ClusterClass Cluster API's test module
// ships: a KubeadmControlPlane and a worker class default-worker, short provisioning delays,
// and one variable, WorkerNoteVariable (a string), which one inline JSON patch writes into the
// default-worker KubeadmConfigTemplate as the content of the file WorkerNoteFile: a change of
// it makes the topology controller compute a new bootstrap template for the workers, a change
// Cluster API's test extension covers in place (KubeadmConfigSpec.Files, see
// test/extension/handlers/inplaceupdate/handlers.go in sigs.k8s.io/cluster-api/test v1.14.2).
// Its value stays WorkerNoteDefault unless a test changes it, so the templates change with
// nothing but the Cluster's topology version otherwise. Every object, and the templates'
// metadata, carries the managers' watch-filter label, which the topology controller copies onto
// what it makes.
func InMemoryClusterClass(namespace, name string) ([]*unstructured.Unstructured, error) {
	inMemoryMachine := `
      backend:
        inMemory:
          vm: {provisioning: {startupDuration: 1s}}
          node: {provisioning: {startupDuration: 1s}}
          apiServer: {provisioning: {startupDuration: 1s}}
          etcd: {provisioning: {startupDuration: 1s}}`
	manifests := fmt.Sprintf(`
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevClusterTemplate
metadata: {name: %[1]s, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  template:
    metadata:
      labels: {cluster.x-k8s.io/watch-filter: %[3]s}
      annotations: {gradual.dev/testbed: in-memory}
    spec:
      backend:
        inMemory: {}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata: {name: %[1]s-control-plane, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  template:
    spec:
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
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: %[1]s-control-plane, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  template:
    spec:%[4]s
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: %[1]s-default-worker, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  template:
    spec:%[4]s
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: %[1]s-default-worker, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          criSocket: unix:///var/run/containerd/containerd.sock
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: %[1]s, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  controlPlane:
    metadata:
      labels: {cluster.x-k8s.io/watch-filter: %[3]s}
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: %[1]s-control-plane}
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DevMachineTemplate, name: %[1]s-control-plane}
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DevClusterTemplate, name: %[1]s}
  workers:
    machineDeployments:
    - class: default-worker
      metadata:
        labels: {cluster.x-k8s.io/watch-filter: %[3]s}
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: %[1]s-default-worker}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DevMachineTemplate, name: %[1]s-default-worker}
  variables:
  - name: %[5]s
    required: false
    schema:
      openAPIV3Schema:
        type: string
        maxLength: 63
        default: %[6]s
  patches:
  - name: worker-note
    definitions:
    - selector:
        apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
        kind: KubeadmConfigTemplate
        matchResources:
          machineDeploymentClass:
            names: [default-worker]
      jsonPatches:
      - op: add
        path: /spec/template/spec/files
        valueFrom:
          template: |
            - path: %[7]s
              content: {{ .%[5]s | quote }}
`, name, namespace, ClusterAPIWatchFilter, inMemoryMachine, WorkerNoteVariable, WorkerNoteDefault, WorkerNoteFile)
	return decodeYAML([]byte(manifests))
}

// The variable of InMemoryClusterClass, its default and the worker bootstrap file it fills.
const (
	WorkerNoteVariable = "workerNote"
	WorkerNoteDefault  = "gradual"
	WorkerNoteFile     = "/etc/gradual/worker-note"
)

// CreateClusterClass creates InMemoryClusterClass(name) in the fleet's Cluster API namespace;
// objects that exist already are left as they are.
func (f *Fleet) CreateClusterClass(ctx context.Context, name string) error {
	f.mu.Lock()
	state := f.ClusterAPI
	f.mu.Unlock()
	if state == nil {
		return fmt.Errorf("fleet %s runs no Cluster API controllers (Options.ClusterAPI)", f.Name)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	objs, err := InMemoryClusterClass(state.Namespace, name)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := mc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// topologyObjects is the Cluster of a cluster built from c.Class (see InMemoryCluster.Class).
func (c InMemoryCluster) topologyObjects() ([]*unstructured.Unstructured, error) {
	rollout := ""
	if c.InPlaceRollout {
		rollout = `
        rollout:
          strategy:
            type: RollingUpdate
            rollingUpdate: {maxSurge: 0, maxUnavailable: 1}`
	}
	manifest := fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: %[1]s, namespace: %[2]s, labels: {cluster.x-k8s.io/watch-filter: %[3]s}}
spec:
  clusterNetwork:
    services: {cidrBlocks: [10.128.0.0/12]}
    pods: {cidrBlocks: [192.168.0.0/16]}
  topology:
    classRef: {name: %[4]s}
    version: %[5]s
    variables:
    - {name: %[8]s, value: %[9]s}
    controlPlane:
      replicas: %[6]d
      metadata:
        labels: {cluster.x-k8s.io/watch-filter: %[3]s}
    workers:
      machineDeployments:
      - class: default-worker
        name: md-0
        replicas: 1
        metadata:
          labels: {cluster.x-k8s.io/watch-filter: %[3]s}%[7]s
`, c.Name, c.Namespace, ClusterAPIWatchFilter, c.Class, c.ControlPlaneVersion, c.controlPlaneReplicas(), rollout, WorkerNoteVariable, WorkerNoteDefault)
	objs, err := decodeYAML([]byte(manifest))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		l := o.GetLabels()
		for k, v := range c.Labels {
			l[k] = v
		}
		o.SetLabels(l)
	}
	return objs, nil
}
