package owners_test

import (
	"context"
	"encoding/base64"
	"net"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// hostAddress is a global unicast IPv4 address of this machine: kube-apiserver refuses to proxy
// to loopback and link-local endpoint addresses, so an extension behind a Service must listen
// on one like it.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("skipping: this machine has no global IPv4 address for an endpoint the API server proxies to")
	return ""
}

// An ExtensionConfig that names a Service is called through the real management API server's
// service proxy: the preview asks the extension behind it and plans the machine in place. A
// second ExtensionConfig serving the same hooks blocks the machine as Cluster API would stop,
// naming both; a Service with no ready endpoint fails the plan naming it. Needs the toolchain.
func TestExtensionBehindAServiceThroughTheAPIServerProxy(t *testing.T) {
	if _, err := testbed.ToolchainFromEnv(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if testing.Short() {
		t.Skip("skipping in -short mode: starts two control planes")
	}
	ip := hostAddress(t)
	f := testbed.Start(t, testbed.Options{Workloads: []testbed.WorkloadSpec{{Name: "edge-1", Ready: true, Nodes: 1}}})
	ctx := t.Context()
	if _, err := f.AddMachineDeployment(ctx, testbed.MachineDeploymentSpec{Cluster: "edge-1", Name: "md-0", Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Management.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	ext, err := updateext.Start(updateext.Config{Name: "behind-service", Address: net.JoinHostPort(ip, "0"), Hosts: []string{ip}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	_, portText, _ := net.SplitHostPort(strings.TrimPrefix(ext.URL(), "https://"))
	port, _ := strconv.Atoi(portText)

	// The extension as a cluster installs it: a Service without selector whose endpoints are the
	// extension's address (Endpoints and an EndpointSlice, whichever the API server reads).
	create(ctx, t, mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ext-system"}})
	create(ctx, t, mc, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ext-system", Name: "updater"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}})
	// The API server's proxy goes only to an endpoint address that names a Pod with that IP.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ext-system", Name: "updater-0"},
		Spec: corev1.PodSpec{NodeName: "no-node", Containers: []corev1.Container{{Name: "updater", Image: "updater"}}}}
	create(ctx, t, mc, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := mc.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	address := corev1.EndpointAddress{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ext-system", Name: "updater-0", UID: pod.UID}}
	endpoints := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ext-system", Name: "updater"}, //nolint:staticcheck // what the API server's proxy reads
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{address}, Ports: []corev1.EndpointPort{{Name: "https", Port: int32(port)}}}}} //nolint:staticcheck
	create(ctx, t, mc, endpoints)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ext-system", Name: "updater-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "updater", discoveryv1.LabelManagedBy: "gradual-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	create(ctx, t, mc, slice)
	create(ctx, t, mc, extensionConfig("updater", ext.CABundle()))

	planner := &owners.Planner{Client: mc, RESTConfig: cfg}
	req := owners.Request{Selection: owners.Selection{Namespace: f.Namespace, Cluster: "edge-1", MachineDeployment: "md-0"},
		Change: inplace.Change{Version: "v1.37.0"}, Fallback: inplace.FallbackNone}
	res, err := planner.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	mp := res.Plan.Machines[0]
	t.Logf("one extension behind a Service: %s by %v; notes %q; extension calls %v", mp.Strategy, mp.Extensions, res.Notes, ext.Calls())
	if mp.Strategy != inplace.StrategyInPlace || len(mp.Extensions) != 1 || mp.Extensions[0] != "updater" {
		t.Errorf("machine plan %+v; want in place by updater", mp)
	}
	if calls := ext.Calls(); calls["Discovery"] != 1 || calls["CanUpdateMachine"] != 1 {
		t.Errorf("extension calls %v; want one Discovery and one CanUpdateMachine, through the proxy", calls)
	}

	// A second extension for the same hooks: Cluster API stops, so the machine is blocked.
	create(ctx, t, mc, extensionConfig("updater-2", ext.CABundle()))
	res, err = planner.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	mp = res.Plan.Machines[0]
	want := "found multiple UpdateMachine hooks (update-machine.updater,update-machine.updater-2): only one hook is supported"
	if mp.Strategy != inplace.StrategyBlocked || !strings.Contains(mp.Stuck, want) || res.Plan.Err() == nil {
		t.Errorf("two extensions: machine plan %+v; want blocked with %q", mp, want)
	}

	// No ready endpoint: a plan-time error naming the ExtensionConfig and the Service.
	if err := mc.Delete(ctx, extensionConfig("updater-2", nil)); err != nil {
		t.Fatal(err)
	}
	slice.Endpoints[0].Conditions.Ready = ptr.To(false)
	if err := mc.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	endpoints.Subsets[0].NotReadyAddresses, endpoints.Subsets[0].Addresses = endpoints.Subsets[0].Addresses, nil
	if err := mc.Update(ctx, endpoints); err != nil {
		t.Fatal(err)
	}
	_, err = planner.Plan(ctx, req)
	e, ok := usererr.As(err)
	if !ok || e.Summary != "Update Extension Not Reachable" || !strings.Contains(e.Detail, "ExtensionConfig updater names Service ext-system/updater port 443, which has no ready endpoint") {
		t.Errorf("no ready endpoint: %v", err)
	}
}

func create(ctx context.Context, t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
}

// extensionConfig registers the Service ext-system/updater (port 443, Cluster API's default).
func extensionConfig(name string, ca []byte) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "runtime.cluster.x-k8s.io/v1beta2",
		"kind":       "ExtensionConfig",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{"clientConfig": map[string]any{
			"service": map[string]any{"namespace": "ext-system", "name": "updater"},
		}},
	}}
	if len(ca) > 0 {
		_ = unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(ca), "spec", "clientConfig", "caBundle")
	}
	return u
}
