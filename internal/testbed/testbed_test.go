package testbed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestFleet brings up a real fleet (1 management + 2 workload control planes) and checks what
// CAPI consumers see, that workloads really roll out, and that Down leaves nothing behind.
// It needs the toolchain from `make tools`, not TF_ACC.
func TestFleet(t *testing.T) {
	if _, err := ToolchainFromEnv(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if testing.Short() {
		t.Skip("skipping in -short mode: starts three control planes")
	}
	f := Start(t, Options{Workloads: []WorkloadSpec{
		{Name: "prod-eu-1", Labels: map[string]string{"env": "prod", "region": "eu"}, Ready: true},
		{Name: "staging-eu-1", Labels: map[string]string{"env": "staging"}, Ready: false, Nodes: 1},
		{Name: "no-secret", Labels: map[string]string{"env": "prod"}, Ready: true, NoKubeconfig: true, KubernetesVersion: "v1.36.3"},
		{Name: "exec-auth", Labels: map[string]string{"env": "prod"}, Ready: true, ExecKubeconfig: true},
	}})
	ctx := t.Context()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("management serves CAPI and the infrastructure kinds", func(t *testing.T) {
		for _, gvk := range []string{
			"clusters.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machines.cluster.x-k8s.io",
			"extensionconfigs.runtime.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
			"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "gradualmachines.infrastructure.gradual.dev",
			"gradualmachinetemplates.infrastructure.gradual.dev", "gradualclusters.infrastructure.gradual.dev",
		} {
			if err := mc.Get(ctx, client.ObjectKey{Name: gvk}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{
				APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition",
			}}); err != nil {
				t.Errorf("CRD %s: %v", gvk, err)
			}
		}
		if v, err := ServerVersion(f.Management); err != nil || v != "v1.36.3" {
			t.Errorf("management /version = %q, %v; want v1.36.3", v, err)
		}
	})

	t.Run("Cluster objects carry labels and CAPI-shaped status", func(t *testing.T) {
		var list clusterv1.ClusterList
		if err := mc.List(ctx, &list, client.InNamespace(DefaultNamespace), client.MatchingLabels{"env": "prod"}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		slices.Sort(names)
		if want := []string{"exec-auth", "no-secret", "prod-eu-1"}; !slices.Equal(names, want) {
			t.Errorf("env=prod clusters = %v, want %v", names, want)
		}
		checkClusterStatus(t, mc, "prod-eu-1", true)
		checkClusterStatus(t, mc, "staging-eu-1", false)
		var c clusterv1.Cluster
		if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "prod-eu-1"}, &c); err != nil {
			t.Fatal(err)
		}
		if c.Spec.InfrastructureRef.Kind != "GradualCluster" || c.Spec.ControlPlaneRef.Kind != "KubeadmControlPlane" || c.Spec.ControlPlaneEndpoint.Port == 0 {
			t.Errorf("spec = %+v", c.Spec)
		}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "no-secret"}, &c); err != nil {
			t.Fatal(err)
		}
		if c.Spec.Topology.Version != "v1.36.3" {
			t.Errorf("no-secret: topology version %q, want v1.36.3", c.Spec.Topology.Version)
		}
	})

	t.Run("kubeconfig Secrets reach the workload API servers", func(t *testing.T) {
		servers := map[string]string{f.Management.Server: "management"}
		for _, name := range []string{"prod-eu-1", "staging-eu-1"} {
			var s corev1.Secret
			if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name + "-kubeconfig"}, &s); err != nil {
				t.Fatal(err)
			}
			if s.Type != clusterv1.ClusterSecretType || s.Labels[clusterv1.ClusterNameLabel] != name {
				t.Errorf("secret %s: type %q labels %v", s.Name, s.Type, s.Labels)
			}
			cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ExecProvider != nil || cfg.CertData == nil {
				t.Errorf("secret %s: want inline client certificates, no exec plugin", s.Name)
			}
			if other, dup := servers[cfg.Host]; dup {
				t.Errorf("%s and %s share API server %s", name, other, cfg.Host)
			}
			servers[cfg.Host] = name
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			v, err := cs.Discovery().ServerVersion()
			if err != nil {
				t.Fatalf("%s via its Secret: %v", name, err)
			}
			if v.GitVersion != "v1.36.3" {
				t.Errorf("%s /version = %s, want v1.36.3", name, v.GitVersion)
			}
		}
		err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "no-secret-kubeconfig"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("no-secret-kubeconfig: got %v, want NotFound", err)
		}
		var s corev1.Secret
		if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "exec-auth-kubeconfig"}, &s); err != nil {
			t.Fatal(err)
		}
		if cfg, err := clientcmd.Load(s.Data["value"]); err != nil || cfg.AuthInfos["exec-auth-admin"] == nil || cfg.AuthInfos["exec-auth-admin"].Exec == nil {
			t.Errorf("exec-auth kubeconfig should ask for an exec plugin: %v", err)
		}
	})

	t.Run("deployments roll out on kwok nodes, unschedulable ones do not", func(t *testing.T) {
		wc, err := f.WorkloadClient("prod-eu-1")
		if err != nil {
			t.Fatal(err)
		}
		good := deployment("good", nil)
		bad := deployment("bad", map[string]string{"no-such-node": "true"})
		for _, d := range []*appsv1.Deployment{good, bad} {
			if err := wc.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return deploymentAvailable(ctx, wc, "good"), nil
		})
		if err != nil {
			t.Fatalf("deployment good not Available: %v", err)
		}
		t.Logf("deployment with 2 replicas Available after %s", time.Since(t0).Round(100*time.Millisecond))
		var pods corev1.PodList
		if err := wc.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "good"}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
				t.Errorf("pod %s: phase %s node %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
		}
		if deploymentAvailable(ctx, wc, "bad") {
			t.Error("deployment bad (unschedulable nodeSelector) is Available")
		}
		if err := wc.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "bad"}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Fatal("deployment bad has no pods")
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodPending {
				t.Errorf("pod %s of deployment bad: phase %s, want Pending", p.Name, p.Status.Phase)
			}
		}
	})

	t.Run("readiness, labels and pause change like CAPI would change them", func(t *testing.T) {
		if err := f.SetReady(ctx, "staging-eu-1", true); err != nil {
			t.Fatal(err)
		}
		checkClusterStatus(t, mc, "staging-eu-1", true)
		if err := f.SetReady(ctx, "prod-eu-1", false); err != nil {
			t.Fatal(err)
		}
		checkClusterStatus(t, mc, "prod-eu-1", false)
		if err := f.SetLabels(ctx, "prod-eu-1", map[string]string{"env": "canary"}); err != nil {
			t.Fatal(err)
		}
		if err := f.SetPaused(ctx, "prod-eu-1", true); err != nil {
			t.Fatal(err)
		}
		var c clusterv1.Cluster
		if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "prod-eu-1"}, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Labels) != 1 || c.Labels["env"] != "canary" || !ptr.Deref(c.Spec.Paused, false) {
			t.Errorf("labels %v paused %v; want only env=canary, paused", c.Labels, c.Spec.Paused)
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.PausedCondition) {
			t.Error("Paused condition not True")
		}
		if err := f.SetPaused(ctx, "prod-eu-1", false); err != nil {
			t.Fatal(err)
		}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "prod-eu-1"}, &c); err != nil {
			t.Fatal(err)
		}
		if c.Spec.Paused != nil && *c.Spec.Paused {
			t.Error("still paused")
		}
	})

	t.Run("state reloads from the directory", func(t *testing.T) {
		g, err := Load(f.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if g.Name != f.Name || g.Management.KubeconfigPath != f.Management.KubeconfigPath || len(g.Workloads) != 4 || g.Workloads["prod-eu-1"].Spec.Labels["env"] != "canary" {
			t.Errorf("loaded %+v", g)
		}
	})

	t.Run("a workload joins and leaves", func(t *testing.T) {
		if err := f.AddWorkload(ctx, WorkloadSpec{Name: "joiner", Labels: map[string]string{"env": "prod"}, Ready: true, Nodes: 1}); err != nil {
			t.Fatal(err)
		}
		checkClusterStatus(t, mc, "joiner", true)
		kwokName := f.Workloads["joiner"].KwokName
		if len(f.Processes()[kwokName]) == 0 {
			t.Fatalf("no processes for %s", kwokName)
		}
		if err := f.RemoveWorkload(ctx, "joiner"); err != nil {
			t.Fatal(err)
		}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: "joiner"}, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			t.Errorf("Cluster joiner after RemoveWorkload: %v", err)
		}
		if p := f.Processes()[kwokName]; len(p) > 0 {
			t.Errorf("processes of %s survive RemoveWorkload: %v", kwokName, p)
		}
	})

	t.Run("down removes everything it started", func(t *testing.T) {
		procs := f.Processes()
		if len(procs) != 3 {
			t.Errorf("control planes with processes before down: %v, want 3", procs)
		}
		var all []int
		for _, p := range procs {
			all = append(all, p...)
		}
		workdir := f.KwokWorkdir()
		t0 := time.Now()
		if err := f.Down(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("down in %s", time.Since(t0).Round(100*time.Millisecond))
		cmd := exec.CommandContext(ctx, f.Toolchain.Kwokctl, "get", "clusters")
		cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+workdir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kwokctl get clusters: %v\n%s", err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("kwokctl get clusters after down: %q", s)
		}
		for _, pid := range all {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil && isLive(pid) {
				t.Errorf("process %d still running after down", pid)
			}
		}
		if _, err := os.Stat(f.Dir); !os.IsNotExist(err) {
			t.Errorf("fleet dir %s still exists: %v", f.Dir, err)
		}
	})
}

func checkClusterStatus(t *testing.T, c client.Client, name string, ready bool) {
	t.Helper()
	var cl clusterv1.Cluster
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: DefaultNamespace, Name: name}, &cl); err != nil {
		t.Fatal(err)
	}
	wantPhase := "Provisioning"
	if ready {
		wantPhase = "Provisioned"
	}
	if cl.Status.Phase != wantPhase {
		t.Errorf("%s: phase %q, want %q", name, cl.Status.Phase, wantPhase)
	}
	if ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false) != ready ||
		ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) != ready {
		t.Errorf("%s: initialization %+v, want %v", name, cl.Status.Initialization, ready)
	}
	for _, typ := range []string{clusterv1.AvailableCondition, clusterv1.ClusterControlPlaneAvailableCondition, clusterv1.InfrastructureReadyCondition} {
		cond := meta.FindStatusCondition(cl.Status.Conditions, typ)
		if cond == nil {
			t.Errorf("%s: no %s condition", name, typ)
			continue
		}
		if (cond.Status == metav1.ConditionTrue) != ready || cond.Reason == "" || cond.Message == "" || cond.LastTransitionTime.IsZero() {
			t.Errorf("%s: condition %+v, want status %v with reason, message and time", name, cond, ready)
		}
	}
	if cl.Status.ObservedGeneration != cl.Generation {
		t.Errorf("%s: observedGeneration %d, generation %d", name, cl.Status.ObservedGeneration, cl.Generation)
	}
}

func deployment(name string, nodeSelector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
				},
			},
		},
	}
}

func deploymentAvailable(ctx context.Context, c client.Client, name string) bool {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &d); err != nil {
		return false
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			return d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.ObservedGeneration == d.Generation
		}
	}
	return false
}

func isLive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
