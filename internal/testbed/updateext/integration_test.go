package updateext_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
)

// TestUpdatesKwokNode plans and performs an in-place update of a test bed Machine through the
// reference extension and checks that the workload's kwok Node really reports the new kubelet
// version, and keeps reporting it (kwok does not overwrite it). Needs the toolchain, not TF_ACC.
func TestUpdatesKwokNode(t *testing.T) {
	if _, err := testbed.ToolchainFromEnv(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if testing.Short() {
		t.Skip("skipping in -short mode: starts two control planes")
	}
	f := testbed.Start(t, testbed.Options{Workloads: []testbed.WorkloadSpec{{Name: "edge-1", Ready: true, Nodes: 2}}})
	ctx := t.Context()
	machines, err := f.AddMachineDeployment(ctx, testbed.MachineDeploymentSpec{Cluster: "edge-1", Name: "md-0", Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := updateext.Start(updateext.Config{Delay: 1500 * time.Millisecond, Nodes: &updateext.ManagementNodes{Client: mc}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ext, err := extension.New(extension.Endpoint{Name: "reference", URL: srv.URL(), CABundle: srv.CABundle()}, extension.Options{})
	if err != nil {
		t.Fatal(err)
	}

	cur := readObjects(ctx, t, mc, f.Namespace, machines[0])
	des, err := inplace.Desired(cur, inplace.Change{Version: "v1.37.0", BootstrapConfigSpec: []byte(`{"ntp":{"servers":["pool.ntp.org"]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	req, err := inplace.CanUpdateMachineRequest(cur, des)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ext.CanUpdateMachine(ctx, updateext.CanUpdateMachineHandler, req)
	if err != nil {
		t.Fatal(err)
	}
	plan := inplace.PlanMachine(cur, des, []inplace.Answer{inplace.AnswerFrom("reference", resp, nil)}, inplace.FallbackNone)
	if plan.Strategy != inplace.StrategyInPlace || plan.Node != "kwok-node-0" || len(plan.Changed) != 2 {
		t.Fatalf("plan %+v", plan)
	}

	upd, err := inplace.UpdateMachineRequest(des)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	polls := 0
	for {
		resp, err := ext.UpdateMachine(ctx, updateext.UpdateMachineHandler, upd)
		if err != nil {
			t.Fatal(err)
		}
		polls++
		if ext.RetryAfter(resp) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("update not done in 30s")
		}
		time.Sleep(ext.RetryAfter(resp))
	}
	if polls < 2 {
		t.Errorf("update done after %d call(s); the delay should have asked for a retry", polls)
	}

	wc, err := f.WorkloadClient("edge-1")
	if err != nil {
		t.Fatal(err)
	}
	kubelet := func(node string) string {
		var n corev1.Node
		if err := wc.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			t.Fatal(err)
		}
		return n.Status.NodeInfo.KubeletVersion
	}
	if got := kubelet("kwok-node-0"); got != "v1.37.0" {
		t.Fatalf("kwok-node-0 kubelet %s, want v1.37.0", got)
	}
	if got := kubelet("kwok-node-1"); got != testbed.KubeletVersion {
		t.Errorf("kwok-node-1 (not updated) kubelet %s", got)
	}
	// kwok heartbeats the Node; the version must survive them.
	time.Sleep(3 * time.Second)
	if got := kubelet("kwok-node-0"); got != "v1.37.0" {
		t.Errorf("after kwok heartbeats kwok-node-0 kubelet is %s again", got)
	}

	srv.FailMachine(f.Namespace, machines[1], "firmware refused")
	cur1 := readObjects(ctx, t, mc, f.Namespace, machines[1])
	des1, err := inplace.Desired(cur1, inplace.Change{Version: "v1.37.0"})
	if err != nil {
		t.Fatal(err)
	}
	upd1, err := inplace.UpdateMachineRequest(des1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.UpdateMachine(ctx, updateext.UpdateMachineHandler, upd1); extension.KindOf(err) != extension.KindFailure {
		t.Errorf("failing machine: %v", err)
	}
}

func readObjects(ctx context.Context, t *testing.T, c client.Client, ns, name string) inplace.Objects {
	t.Helper()
	get := func(group, version, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
		}
		return u
	}
	return inplace.Objects{
		Machine:               get("cluster.x-k8s.io", "v1beta2", "Machine"),
		InfrastructureMachine: get(testbed.InfrastructureGroup, "v1beta1", "GradualMachine"),
		BootstrapConfig:       get("bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfig"),
	}
}
