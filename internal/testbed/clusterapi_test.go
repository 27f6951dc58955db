package testbed

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterAPITestEnv opts in to TestClusterAPIControllers: it is not part of `make test` yet.
const clusterAPITestEnv = "GRADUAL_TEST_CLUSTER_API"

// TestClusterAPIControllers starts a fleet with the real Cluster API controllers and checks that
// CAPI itself provisions an in-memory cluster (KubeadmControlPlane + MachineDeployment on CAPD's
// in-memory backend), that the kwok-backed Cluster whose status the test bed writes is left
// alone, that CAPI's test extension registers through an ExtensionConfig, and what CAPI does when
// the MachineDeployment's version changes with that extension registered (in place).
//
// Run it under the fleet lock, one fleet at a time on the machine (CAPD's in-memory servers use
// fixed ports):
//
//	source ~/.cache/terraform-provider-gradual/toolchain.env
//	GRADUAL_TEST_CLUSTER_API=1 flock -o /tmp/gradual-fleet.lock go test -run TestClusterAPIControllers -v ./internal/testbed/
//
// (-o: the lock's descriptor is not passed on, so daemons of a test that was killed cannot keep
// holding it.)
func TestClusterAPIControllers(t *testing.T) {
	tc, err := ToolchainFromEnv()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	if !tc.HasClusterAPI() {
		t.Skipf("skipping: Cluster API binaries missing (%s); build them with `tools/toolchain.sh cluster-api`", strings.Join(missingClusterAPI(tc.ClusterAPI), ", "))
	}
	if os.Getenv(clusterAPITestEnv) != "1" {
		t.Skipf("skipping: set %s=1 to run (starts the real Cluster API controllers; run under flock /tmp/gradual-fleet.lock)", clusterAPITestEnv)
	}
	t0 := time.Now()
	f := Start(t, Options{
		ClusterAPI: true,
		Workloads:  []WorkloadSpec{{Name: "kwok-1", Ready: true, Nodes: 1}},
	})
	t.Logf("fleet with Cluster API controllers up in %s", time.Since(t0).Round(100*time.Millisecond))
	ctx := t.Context()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	ns := f.ClusterAPI.Namespace
	const name = "mem-1"

	t0 = time.Now()
	for _, o := range inMemoryCluster(t, ns, name, "v1.34.2", "v1.34.0") {
		if err := mc.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	t.Run("webhooks default what the manifests leave out", func(t *testing.T) {
		// The MachineDeployment was created without spec.selector (required by the CRD): only
		// the core manager's defaulting webhook, reached on 127.0.0.1, can have filled it in.
		var md clusterv1.MachineDeployment
		if err := mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-md-0"}, &md); err != nil {
			t.Fatal(err)
		}
		if md.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentNameLabel] != md.Name {
			t.Errorf("MachineDeployment selector %v: not defaulted by the webhook", md.Spec.Selector.MatchLabels)
		}
	})

	t.Run("CAPI provisions the cluster", func(t *testing.T) {
		var cl clusterv1.Cluster
		waitFor(t, ctx, 4*time.Minute, "Cluster "+name+" control plane initialized and Available", func() (bool, string) {
			if err := mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cl); err != nil {
				return false, err.Error()
			}
			avail := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.AvailableCondition)
			init := cl.Status.Initialization.ControlPlaneInitialized != nil && *cl.Status.Initialization.ControlPlaneInitialized
			if avail == nil {
				return false, fmt.Sprintf("phase %s, initialized %v, no Available condition", cl.Status.Phase, init)
			}
			return init && avail.Status == metav1.ConditionTrue, fmt.Sprintf("phase %s, initialized %v, Available %s: %s", cl.Status.Phase, init, avail.Status, avail.Message)
		})
		t.Logf("Cluster %s Available after %s (phase %s)", name, time.Since(t0).Round(time.Second), cl.Status.Phase)

		// The kubeconfig Secret is CAPI's (KCP writes it, owned by the KubeadmControlPlane), and
		// it reaches the in-memory API server CAPD serves.
		wc := workloadClient(t, mc, ns, name)
		var nodes corev1.NodeList
		if err := wc.List(ctx, &nodes); err != nil {
			t.Fatalf("list Nodes through CAPI's kubeconfig: %v", err)
		}

		var machines clusterv1.MachineList
		waitFor(t, ctx, 2*time.Minute, "2 Machines Running with nodeRefs", func() (bool, string) {
			if err := mc.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
				return false, err.Error()
			}
			var states []string
			ok := len(machines.Items) == 2
			for _, m := range machines.Items {
				states = append(states, fmt.Sprintf("%s=%s node=%q", m.Name, m.Status.Phase, m.Status.NodeRef.Name))
				ok = ok && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined()
			}
			return ok, strings.Join(states, ", ")
		})
		if err := wc.List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 2 {
			t.Errorf("workload Nodes = %d, want 2 (one per Machine)", len(nodes.Items))
		}
	})

	t.Run("the fleet's kwok-backed Cluster is left alone", func(t *testing.T) {
		var cl clusterv1.Cluster
		if err := mc.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "kwok-1"}, &cl); err != nil {
			t.Fatal(err)
		}
		// The core manager adds its finalizer to every Cluster it reconciles.
		if slices.Contains(cl.Finalizers, clusterv1.ClusterFinalizer) {
			t.Errorf("Cluster %s/kwok-1 has CAPI's finalizer: the controllers are not scoped to %s", f.Namespace, ns)
		}
		checkClusterStatus(t, mc, "kwok-1", true)
	})

	t.Run("CAPI discovers the test extension's in-place handlers", func(t *testing.T) {
		const ext = "test-extension"
		if err := f.RegisterTestExtension(ctx, ext); err != nil {
			t.Fatal(err)
		}
		var ec runtimev1.ExtensionConfig
		s := runtime.NewScheme()
		if err := runtimev1.AddToScheme(s); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Management.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := client.New(cfg, client.Options{Scheme: s})
		if err != nil {
			t.Fatal(err)
		}
		// Discovered can turn true before the handlers are listed (seen once in CI: the condition
		// true, the handlers empty, a second later both set): wait for both.
		waitFor(t, ctx, time.Minute, "ExtensionConfig "+ext+" Discovered with its handlers", func() (bool, string) {
			if err := rc.Get(ctx, client.ObjectKey{Name: ext}, &ec); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition)
			if c == nil {
				return false, "no Discovered condition"
			}
			return c.Status == metav1.ConditionTrue && len(ec.Status.Handlers) > 0, fmt.Sprintf("%s (%d handlers)", c.Message, len(ec.Status.Handlers))
		})
		handlers := map[string]string{}
		for _, h := range ec.Status.Handlers {
			handlers[h.Name] = h.RequestHook.Hook
		}
		for handler, hook := range map[string]string{
			"can-update-machine." + ext: "CanUpdateMachine", "can-update-machineset." + ext: "CanUpdateMachineSet", "update-machine." + ext: "UpdateMachine",
		} {
			if handlers[handler] != hook {
				t.Errorf("handler %s: hook %q, want %q (handlers %v)", handler, handlers[handler], hook, handlers)
			}
		}
	})

	// With the extension covering a version change (the test extension covers Machine
	// spec.version), what CAPI does still depends on the rollout strategy: with the default
	// maxSurge 1 / maxUnavailable 0 and one replica it surges one new Machine "to create
	// availability for in-place updates", and once that one is up the old MachineSet has nothing
	// left to move: the Machine is replaced. With maxUnavailable 1 / maxSurge 0 it moves the
	// Machine to the new MachineSet and updates it in place. A preview has to model both.
	t.Run("maxUnavailable 0: a covered version change still replaces the only Machine", func(t *testing.T) {
		seen, sawUpdating, took := changeWorkerVersion(t, mc, ns, name, "v1.34.1", nil)
		t.Logf("v1.34.0 -> v1.34.1 with maxSurge 1, maxUnavailable 0: settled after %s; Machines seen %v; Updating seen %v", took, seen, sawUpdating)
		if len(seen) != 2 {
			t.Errorf("Machines seen during the change %v: want the old one and its replacement", seen)
		}
	})

	t.Run("maxUnavailable 1: a covered version change is done in place", func(t *testing.T) {
		seen, sawUpdating, took := changeWorkerVersion(t, mc, ns, name, "v1.34.2", &clusterv1.MachineDeploymentRolloutStrategy{
			Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			},
		})
		t.Logf("v1.34.1 -> v1.34.2 with maxSurge 0, maxUnavailable 1: settled after %s; Machines seen %v; Updating seen %v", took, seen, sawUpdating)
		if len(seen) != 1 {
			t.Errorf("Machines seen during the change %v: want the one Machine, updated in place", seen)
		}
		if !sawUpdating {
			t.Error("the Machine never reported Updating=True: not updated in place")
		}
	})
}

// changeWorkerVersion sets the MachineDeployment's version (and rollout strategy, when given)
// and waits until its one Machine is on that version, up to date and not updating. It returns
// the names of every worker Machine seen meanwhile, whether one reported Updating=True, and how
// long it took.
func changeWorkerVersion(t *testing.T, c client.Client, ns, cluster, version string, strategy *clusterv1.MachineDeploymentRolloutStrategy) ([]string, bool, time.Duration) {
	t.Helper()
	ctx := t.Context()
	before := workerMachines(t, c, ns, cluster)
	if len(before) != 1 {
		t.Fatalf("worker Machines %v, want 1", slices.Collect(maps.Keys(before)))
	}
	t0 := time.Now()
	var md clusterv1.MachineDeployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-md-0"}, &md); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.Version = version
	if strategy != nil {
		md.Spec.Rollout.Strategy = *strategy
	}
	if err := c.Patch(ctx, &md, patch); err != nil {
		t.Fatal(err)
	}
	seen := slices.Collect(maps.Keys(before))
	var sawUpdating bool
	wc := workloadClient(t, c, ns, cluster)
	waitFor(t, ctx, 3*time.Minute, "the worker Machine on "+version+", up to date", func() (bool, string) {
		now := workerMachines(t, c, ns, cluster)
		var states []string
		ok := len(now) == 1
		for n, m := range now {
			if !slices.Contains(seen, n) {
				seen = append(seen, n)
			}
			updating := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition)
			sawUpdating = sawUpdating || updating
			if sawUpdating && m.Spec.Version == version && m.Status.NodeRef.IsDefined() {
				// CAPI's test extension only pretends to update (UpdateMachine answers "done"
				// after ~15 s), and CAPI keeps the Machine UpToDate=False until the Node's
				// kubelet reports the new version: play the kubelet that restarted on it.
				if err := setKubeletVersion(ctx, wc, m.Status.NodeRef.Name, version); err != nil {
					return false, err.Error()
				}
			}
			upToDate := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			states = append(states, fmt.Sprintf("%s version=%s upToDate=%v updating=%v", n, m.Spec.Version, upToDate, updating))
			ok = ok && m.Spec.Version == version && upToDate && !updating
		}
		return ok, strings.Join(states, ", ")
	})
	return seen, sawUpdating, time.Since(t0).Round(time.Second)
}

// setKubeletVersion makes a Node of CAPD's in-memory API server report a kubelet version (that
// server takes status in a plain patch; it serves no status subresource).
func setKubeletVersion(ctx context.Context, wc client.Client, node, version string) error {
	var n corev1.Node
	if err := wc.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	if n.Status.NodeInfo.KubeletVersion == version {
		return nil
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Status.NodeInfo.KubeletVersion = version
	if err := wc.Patch(ctx, &n, patch); err != nil {
		return fmt.Errorf("node %s: set kubelet version: %w", node, err)
	}
	return nil
}

// workloadClient reaches a CAPI-provisioned cluster through its <name>-kubeconfig Secret, after
// checking that CAPI wrote it (KCP owns it), not the test bed.
func workloadClient(t *testing.T, mc client.Client, ns, cluster string) client.Client {
	t.Helper()
	var secret corev1.Secret
	if err := mc.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster + "-kubeconfig"}, &secret); err != nil {
		t.Fatalf("kubeconfig Secret: %v", err)
	}
	if !slices.ContainsFunc(secret.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "KubeadmControlPlane" }) {
		t.Errorf("kubeconfig Secret owners %v: want the KubeadmControlPlane (written by CAPI, not the test bed)", secret.OwnerReferences)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return wc
}

// workerMachines are the cluster's MachineDeployment Machines by name.
func workerMachines(t *testing.T, c client.Client, ns, cluster string) map[string]clusterv1.Machine {
	t.Helper()
	var list clusterv1.MachineList
	if err := c.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{
		clusterv1.ClusterNameLabel: cluster, clusterv1.MachineDeploymentNameLabel: cluster + "-md-0",
	}); err != nil {
		t.Fatal(err)
	}
	out := map[string]clusterv1.Machine{}
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out[m.Name] = m
		}
	}
	return out
}

// waitFor polls until done reports true; on timeout the test fails with the last state seen.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what string, done func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		ok, state := done()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v; last: %s", timeout, what, err, last)
	}
}

// inMemoryCluster is testbed.InMemoryCluster's objects, failing the test if they do not decode.
func inMemoryCluster(t *testing.T, ns, name, cpVersion, mdVersion string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := InMemoryCluster{Namespace: ns, Name: name, ControlPlaneVersion: cpVersion, WorkerVersion: mdVersion}.Objects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
