package testbed

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
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
	// maxSurge 1 it creates a new Machine first and deletes the old one). With ControlPlaneReplicas
	// of 3 or more it gives the KubeadmControlPlane maxSurge 0 too (its webhook allows 0 from 3
	// replicas): KubeadmControlPlane then updates each Machine in place, one at a time, rather than
	// creating one and deleting another.
	InPlaceRollout bool
	// ControlPlaneReplicas is the KubeadmControlPlane's replicas; 0 means 1.
	ControlPlaneReplicas int
	// Class, when set, builds the cluster from that ClusterClass (see InMemoryClusterClass)
	// instead: a Cluster with spec.topology at ControlPlaneVersion (a topology runs one version;
	// WorkerVersion is not used) and one MachineDeployment topology "md-0" of class
	// default-worker; the topology controller makes the other objects. Needs Cluster API's
	// ClusterTopology feature gate, which the test bed turns on.
	Class string
}

// controlPlaneReplicas is ControlPlaneReplicas with its default.
func (c InMemoryCluster) controlPlaneReplicas() int {
	if c.ControlPlaneReplicas <= 0 {
		return 1
	}
	return c.ControlPlaneReplicas
}

// Objects are the cluster's objects: a DevCluster, a KubeadmControlPlane (one replica unless
// ControlPlaneReplicas says otherwise) and a
// one-replica MachineDeployment with DevMachineTemplates and a KubeadmConfigTemplate. The
// MachineDeployment has no selector (the webhook defaults it). Every object, and the templates'
// metadata, carries the managers' watch-filter label. Provisioning delays are short, so the
// cluster is up in seconds.
func (c InMemoryCluster) Objects() ([]*unstructured.Unstructured, error) {
	if c.Class != "" {
		return c.topologyObjects()
	}
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
	cpRollout := ""
	if c.InPlaceRollout && c.controlPlaneReplicas() >= 3 {
		cpRollout = `
  rollout:
    strategy:
      type: RollingUpdate
      rollingUpdate: {maxSurge: 0}`
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
  replicas: %[8]d%[9]s
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
`, c.Name, c.Namespace, c.ControlPlaneVersion, c.WorkerVersion, inMemoryMachine, ClusterAPIWatchFilter, rollout, c.controlPlaneReplicas(), cpRollout)
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

// CreateInMemory creates the clusters' objects on CAPD's in-memory backend in the fleet's Cluster
// API namespace (their Namespace is set to it) and returns without waiting for Cluster API to
// bring them up (ProvisionInMemory waits). The fleet must run the Cluster API controllers
// (Options.ClusterAPI). Objects that exist already are left as they are.
func (f *Fleet) CreateInMemory(ctx context.Context, clusters ...InMemoryCluster) error {
	_, err := f.createInMemory(ctx, clusters)
	return err
}

// createInMemory is CreateInMemory, returning the Cluster API namespace.
func (f *Fleet) createInMemory(ctx context.Context, clusters []InMemoryCluster) (string, error) {
	f.mu.Lock()
	state := f.ClusterAPI
	f.mu.Unlock()
	if state == nil {
		return "", fmt.Errorf("fleet %s runs no Cluster API controllers (Options.ClusterAPI)", f.Name)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return "", err
	}
	for _, c := range clusters {
		c.Namespace = state.Namespace
		objs, err := c.Objects()
		if err != nil {
			return "", err
		}
		for _, o := range objs {
			if err := mc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return "", fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
	}
	return state.Namespace, nil
}

// ProvisionInMemory creates the clusters (CreateInMemory) and waits, within ctx, until Cluster
// API has brought every Machine of theirs up: Running, with a Node, UpToDate. Clusters that exist
// already are left as they are.
func (f *Fleet) ProvisionInMemory(ctx context.Context, clusters ...InMemoryCluster) error {
	namespace, err := f.createInMemory(ctx, clusters)
	if err != nil {
		return err
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	// want is how many Machines each cluster has when it is up: its control plane's and a worker.
	want := map[string]int{}
	for _, c := range clusters {
		want[c.Name] = c.controlPlaneReplicas() + 1
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var list clusterv1.MachineList
		if err := mc.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // a failed read is retried until ctx ends
		}
		var states []string
		perCluster := map[string]int{}
		ok := true
		for _, m := range list.Items {
			if want[m.Spec.ClusterName] == 0 {
				continue
			}
			perCluster[m.Spec.ClusterName]++
			up := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			states = append(states, fmt.Sprintf("%s=%s node=%q upToDate=%v", m.Name, m.Status.Phase, m.Status.NodeRef.Name, up))
			ok = ok && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() && up
		}
		for name, n := range want {
			ok = ok && perCluster[name] >= n
		}
		last = strings.Join(states, ", ")
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("in-memory clusters: Machines not Running: %w; last: %s", err, last)
	}
	return nil
}

// WorkloadClient is a client of a CAPI-provisioned cluster, from the `<cluster>-kubeconfig`
// Secret Cluster API wrote in namespace.
func WorkloadClient(ctx context.Context, mc client.Client, namespace, cluster string) (client.Client, error) {
	var secret corev1.Secret
	if err := mc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + "-kubeconfig"}, &secret); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{})
}

// Kubelet stands in for the kubelets CAPD's in-memory backend does not run: CAPI's test
// extension only pretends to update a Machine in place, and Cluster API keeps the Machine
// UpToDate=False until its Node's kubelet reports the new version (the MachineSet's and the
// KubeadmControlPlane's controllers alike). The Node of a Machine (a worker or a control plane
// one) of a cluster it plays for is made to report the Machine's version, as a kubelet restarted
// by the update would. It decides nothing: whether Cluster API updates in place, and when it calls
// a Machine done, stays Cluster API's. A cluster it does not play for is one whose kubelets do
// not come back on the new version (a failed update); Play makes them recover.
type Kubelet struct {
	mu       sync.Mutex
	all      bool
	clusters map[string]bool
}

// NewKubelet plays for the clusters named, or for every cluster when none is.
func NewKubelet(clusters ...string) *Kubelet {
	k := &Kubelet{clusters: map[string]bool{}, all: len(clusters) == 0}
	k.Play(clusters...)
	return k
}

// Play adds clusters to those the stand-in plays for.
func (k *Kubelet) Play(clusters ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range clusters {
		k.clusters[c] = true
	}
}

func (k *Kubelet) playing(cluster string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.all || k.clusters[cluster]
}

// Run plays, once a second, until ctx ends.
func (k *Kubelet) Run(ctx context.Context, mc client.Client, namespace string) {
	wcs := map[string]client.Client{}
	for ctx.Err() == nil {
		if clock.Sleep(ctx, time.Second) != nil {
			return
		}
		var list clusterv1.MachineList
		if err := mc.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{clusterv1.ClusterNameLabel}); err != nil {
			continue
		}
		for _, m := range list.Items {
			cluster := m.Spec.ClusterName
			if !k.playing(cluster) || !m.Status.NodeRef.IsDefined() {
				continue
			}
			wc := wcs[cluster]
			if wc == nil {
				var err error
				if wc, err = WorkloadClient(ctx, mc, namespace, cluster); err != nil {
					continue
				}
				wcs[cluster] = wc
			}
			var n corev1.Node
			if err := wc.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &n); err != nil || n.Status.NodeInfo.KubeletVersion == m.Spec.Version {
				continue
			}
			patch := client.MergeFrom(n.DeepCopy())
			n.Status.NodeInfo.KubeletVersion = m.Spec.Version
			// A plain patch, as the in-memory API servers take a Node's status with it.
			_ = wc.Patch(ctx, &n, patch)
		}
	}
}
