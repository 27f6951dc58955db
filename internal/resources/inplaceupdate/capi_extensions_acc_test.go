package inplaceupdate_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// secondExtension is CAPI's test extension registered a second time, under another
// ExtensionConfig: Cluster API then finds two handlers for each of its hooks.
const secondExtension = extensionName + "-2"

// registerSecondExtension registers secondExtension and waits until Cluster API has discovered
// its handlers (it counts only those); the test's cleanup removes it.
func registerSecondExtension(t *testing.T, f *testbed.Fleet, mc client.Client) {
	t.Helper()
	ctx := context.Background()
	ec := &unstructured.Unstructured{}
	ec.SetAPIVersion("runtime.cluster.x-k8s.io/v1beta2")
	ec.SetKind("ExtensionConfig")
	ec.SetName(secondExtension)
	t.Cleanup(func() {
		if err := mc.Delete(context.Background(), ec); client.IgnoreNotFound(err) != nil {
			t.Errorf("remove %s: %v", secondExtension, err)
		}
	})
	if err := f.RegisterTestExtension(ctx, secondExtension); err != nil {
		t.Fatal(err)
	}
	var handlers []any
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(ec.GroupVersionKind())
		if err := mc.Get(ctx, client.ObjectKey{Name: secondExtension}, got); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		handlers, _, _ = unstructured.NestedSlice(got.Object, "status", "handlers")
		return len(handlers) > 0, nil
	})
	if err != nil {
		t.Fatalf("Cluster API did not discover %s's handlers: %v", secondExtension, err)
	}
}

// otherVersion is a version the workers are not on (earlier tests bump them), at most the
// control plane's.
func otherVersion(current string) string {
	for _, v := range []string{"v1.34.2", "v1.34.1", "v1.34.0"} {
		if v != current {
			return v
		}
	}
	return ""
}

// With CAPI's test extension registered twice, a version bump the extension covers is refused
// at plan even with fallback "rolling": Cluster API calls one extension per in-place hook, and
// the error names both CanUpdateMachineSet handlers as Cluster API's own error does. Nothing is
// written. TestAccCAPIInPlace_twoExtensionsCAPIStops shows what Cluster API does.
func TestAccCAPIInPlace_twoExtensionsRefusedAtPlan(t *testing.T) {
	f, mc := capiFleet(t)
	md := machineDeployment(t, mc)
	m := worker(t, mc)
	registerSecondExtension(t, f, mc)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: config(f, `  version  = "`+otherVersion(md.Spec.Template.Spec.Version)+`"
  fallback = "rolling"`),
			ExpectError: regexp.MustCompile(`(?s)Machines Cannot Be Updated In Place.*machine\s+` + regexp.QuoteMeta(m.Name) +
				`:\s+Cluster\s+API\s+calls\s+one\s+extension\s+per\s+in-place\s+hook.*found\s+multiple\s+CanUpdateMachineSet\s+hooks\s+\(can-update-machineset\.` +
				regexp.QuoteMeta(extensionName) + `,can-update-machineset\.` + regexp.QuoteMeta(secondExtension) + `\).*no\s+fallback\s+helps`),
		}},
	})
	if now := machineDeployment(t, mc); now.Generation != md.Generation || now.Spec.Template.Spec.Version != md.Spec.Template.Spec.Version {
		t.Errorf("MachineDeployment written by a refused plan: generation %d → %d, version %s → %s",
			md.Generation, now.Generation, md.Spec.Template.Spec.Version, now.Spec.Template.Spec.Version)
	}
}

// What Cluster API does where the preview refuses: with the test extension registered twice,
// the preview blocks the worker naming both handlers; the same version bump written to the
// MachineDeployment anyway is neither done in place nor by replacement: Cluster API's
// MachineDeployment controller stops with "found multiple CanUpdateMachineSet hooks" and the
// worker keeps its UID and version. The bump is taken back before the second extension goes.
func TestAccCAPIInPlace_twoExtensionsCAPIStops(t *testing.T) {
	acctest.OnOneLane(t, 0) // what Cluster API does, not how a CLI drives the provider
	f, mc := capiFleet(t)
	playKubelet(t, mc)
	before := worker(t, mc)
	oldVersion := machineDeployment(t, mc).Spec.Template.Spec.Version
	registerSecondExtension(t, f, mc)

	cfg, err := f.Management.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	version := otherVersion(oldVersion)
	res, err := (&owners.Planner{Client: mc, RESTConfig: cfg}).Plan(context.Background(), owners.Request{
		Selection: owners.Selection{Namespace: testbed.DefaultClusterAPINamespace, Cluster: memCluster, MachineDeployment: workers},
		Change:    inplace.Change{Version: version}, Fallback: inplace.FallbackRolling,
	})
	if err != nil {
		t.Fatal(err)
	}
	mp := res.Plan.Machines[0]
	if mp.Strategy != inplace.StrategyBlocked || !strings.Contains(mp.Stuck, "found multiple CanUpdateMachineSet hooks") {
		t.Fatalf("preview %+v; want blocked, Cluster API stopping", mp)
	}

	core := ""
	for _, p := range f.ClusterAPI.Processes {
		if p.Name == "capi-core" {
			core = p.Log
		}
	}
	logged := 0
	if fi, err := os.Stat(core); err == nil {
		logged = int(fi.Size())
	}
	// Written anyway, as a resource without the one-hook rule would have; taken back before the
	// second extension is removed (cleanups run last first).
	setVersion := func(v string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			now := machineDeployment(t, mc)
			now.Spec.Template.Spec.Version = v
			return mc.Update(context.Background(), &now)
		})
	}
	t.Cleanup(func() {
		if err := setVersion(oldVersion); err != nil {
			t.Errorf("take the version bump back: %v", err)
		}
	})
	if err := setVersion(version); err != nil {
		t.Fatal(err)
	}
	const capiSays = "found multiple CanUpdateMachineSet hooks"
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(core)
		return err == nil && len(log) > logged && strings.Contains(string(log[logged:]), capiSays), nil
	})
	if err != nil {
		t.Fatalf("the core manager's log (%s) never says %q: %v", core, capiSays, err)
	}
	var machines clusterv1.MachineList
	if err := mc.List(context.Background(), &machines, client.InNamespace(testbed.DefaultClusterAPINamespace),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: workers}); err != nil {
		t.Fatal(err)
	}
	if len(machines.Items) != 1 || machines.Items[0].UID != before.UID || machines.Items[0].Spec.Version != before.Spec.Version || !machines.Items[0].DeletionTimestamp.IsZero() {
		var got []string
		for _, m := range machines.Items {
			got = append(got, fmt.Sprintf("%s (%s, %s, deleting=%v)", m.Name, m.UID, m.Spec.Version, !m.DeletionTimestamp.IsZero()))
		}
		t.Fatalf("worker %s (%s, %s) is now %v: Cluster API went on although it found two extensions", before.Name, before.UID, before.Spec.Version, got)
	}
	t.Logf("preview: %s blocked (%s); Cluster API: %q in the core manager's log, Machine %s kept UID %s and version %s",
		mp.Machine, mp.Stuck, capiSays, before.Name, before.UID, before.Spec.Version)
}

// managerLog is the log file of the Cluster API manager process name and its size now (what a
// test reads after).
func managerLog(t *testing.T, f *testbed.Fleet, name string) (path string, size int) {
	t.Helper()
	for _, p := range f.ClusterAPI.Processes {
		if p.Name == name {
			path = p.Log
		}
	}
	if path == "" {
		t.Fatalf("no Cluster API process %s", name)
	}
	if fi, err := os.Stat(path); err == nil {
		size = int(fi.Size())
	}
	return path, size
}

// waitForLog waits until the log at path says what after its first from bytes.
func waitForLog(t *testing.T, path string, from int, what string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(path)
		return err == nil && len(log) > from && strings.Contains(string(log[from:]), what), nil
	})
	if err != nil {
		t.Fatalf("the log %s never says %q: %v", path, what, err)
	}
}

// The control plane's side of the one-hook rule, on the three-replica KubeadmControlPlane that
// Cluster API updates in place (maxSurge 0), with CAPI's test extension registered twice. The
// preview: a version bump the extension covers is refused at plan under fallback "none", a
// control plane Machine blocked with the error naming both CanUpdateMachine handlers as
// KubeadmControlPlane's own error does; nothing is written. What Cluster API does: the same bump
// written to the KubeadmControlPlane anyway makes KubeadmControlPlane stop with "found multiple
// CanUpdateMachine hooks (…): only one hook is supported" (its manager's log), and the three
// Machines keep their UIDs and version, none deleted. The bump is taken back before the second
// extension goes.
func TestAccCAPIInPlace_twoExtensionsControlPlane(t *testing.T) {
	acctest.OnOneLane(t, controlPlaneLane) // what Cluster API's KubeadmControlPlane does, not how a CLI drives the provider
	f, mc := capiFleet(t)
	playKubelet(t, mc, cpCluster)
	before := controlPlaneMachines(t, mc, cpCluster, 3)
	kcpKey := client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: cpCluster + "-control-plane"}
	kcp := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("controlplane.cluster.x-k8s.io/v1beta2")
		u.SetKind("KubeadmControlPlane")
		if err := mc.Get(context.Background(), kcpKey, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	kcpBefore := kcp()
	oldVersion, _, _ := unstructured.NestedString(kcpBefore.Object, "spec", "version")
	registerSecondExtension(t, f, mc)
	// Past any version earlier tests leave the control plane on (v1.34.3 after
	// TestAccCAPIInPlace_controlPlaneInPlace).
	const version = "v1.34.4"
	handlers := `can-update-machine\.` + regexp.QuoteMeta(extensionName) + `,can-update-machine\.` + regexp.QuoteMeta(secondExtension)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_inplace_update" "cp" {
  namespace     = %q
  cluster       = %q
  control_plane = %q
  version       = %q
  fallback      = "none"
  verify        = { timeout = "1m" } # bounds the apply a plan that failed to refuse would make
}
`, testbed.DefaultClusterAPINamespace, cpCluster, kcpKey.Name, version),
			ExpectError: regexp.MustCompile(`(?s)Machines Cannot Be Updated In Place.*machine\s+` + regexp.QuoteMeta(before[0].Name) +
				`:\s+Cluster\s+API\s+calls\s+one\s+extension\s+per\s+in-place\s+hook.*found\s+multiple\s+CanUpdateMachine\s+hooks\s+\(` + handlers + `\)`),
		}},
	})
	if now := kcp(); now.GetGeneration() != kcpBefore.GetGeneration() {
		t.Fatalf("KubeadmControlPlane written by a refused plan: generation %d → %d", kcpBefore.GetGeneration(), now.GetGeneration())
	}

	// Written anyway, as a resource without the one-hook rule would have; taken back before the
	// second extension is removed (cleanups run last first).
	kcpLog, logged := managerLog(t, f, "capi-kubeadm-control-plane")
	setVersion := func(v string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u := kcp()
			if err := unstructured.SetNestedField(u.Object, v, "spec", "version"); err != nil {
				return err
			}
			return mc.Update(context.Background(), u)
		})
	}
	t.Cleanup(func() {
		if err := setVersion(oldVersion); err != nil {
			t.Errorf("take the version bump back: %v", err)
		}
	})
	if err := setVersion(version); err != nil {
		t.Fatal(err)
	}
	const capiSays = "found multiple CanUpdateMachine hooks"
	waitForLog(t, kcpLog, logged, capiSays)
	var machines clusterv1.MachineList
	if err := mc.List(context.Background(), &machines, client.InNamespace(testbed.DefaultClusterAPINamespace),
		client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcpKey.Name}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, m := range before {
		uids[string(m.UID)] = true
	}
	var got []string
	moved := len(machines.Items) != len(before)
	for _, m := range machines.Items {
		got = append(got, fmt.Sprintf("%s (UID %s, %s, deleting=%v)", m.Name, m.UID, m.Spec.Version, !m.DeletionTimestamp.IsZero()))
		moved = moved || !uids[string(m.UID)] || m.Spec.Version != oldVersion || !m.DeletionTimestamp.IsZero()
	}
	if moved {
		t.Fatalf("control plane Machines are now %v: KubeadmControlPlane went on although it found two extensions", got)
	}
	t.Logf("preview: refused at plan, %s blocked naming both CanUpdateMachine handlers; Cluster API: %q in KubeadmControlPlane's log, Machines kept: %s",
		before[0].Name, capiSays, strings.Join(got, ", "))
}
