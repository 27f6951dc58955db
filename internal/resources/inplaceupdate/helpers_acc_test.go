package inplaceupdate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
)

func TestMain(m *testing.M) { acctest.Main(m) }

// bed is what one test works on: a workload cluster of its own (so tests sharing a fleet do not
// touch each other's Nodes) with a MachineDeployment of replicas Machines.
type bed struct {
	f        *testbed.Fleet
	cluster  string
	machines []string
	nodes    *recordingNodes
}

// recordingNodes notes when the extension finished updating each machine's Node.
type recordingNodes struct {
	inner updateext.NodeUpdater
	mu    sync.Mutex
	at    map[string]time.Time
}

func (r *recordingNodes) SetKubeletVersion(ctx context.Context, namespace, machine, version string) error {
	err := r.inner.SetKubeletVersion(ctx, namespace, machine, version)
	r.mu.Lock()
	r.at[machine] = time.Now()
	r.mu.Unlock()
	return err
}

func (r *recordingNodes) finished(machine string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[machine]
	return t, ok
}

func newBed(t *testing.T, replicas int) *bed {
	t.Helper()
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("inplace")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: name, Labels: map[string]string{"run": name}, Ready: true, Nodes: replicas}); err != nil {
		t.Fatalf("add workload %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := f.RemoveWorkload(ctx, name); err != nil {
			t.Errorf("remove workload %s: %v", name, err)
		}
	})
	t.Cleanup(func() { deleteMachineObjects(t, f, name) })
	machines, err := f.AddMachineDeployment(ctx, testbed.MachineDeploymentSpec{Cluster: name, Name: name + "-md", Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	return &bed{f: f, cluster: name, machines: machines}
}

// extension starts the reference update extension; coverage nil is its default (Machine
// spec.version, bootstrap spec.files and spec.ntp).
func (b *bed) extension(t *testing.T, name string, coverage *updateext.Coverage, delay time.Duration) *updateext.Server {
	t.Helper()
	mc, err := b.f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	b.nodes = &recordingNodes{inner: &updateext.ManagementNodes{Client: mc}, at: map[string]time.Time{}}
	srv, err := updateext.Start(updateext.Config{Name: name, Coverage: coverage, Delay: delay, Nodes: b.nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// ext is one `extensions` entry.
type ext struct {
	name, url, ca, timeout string
}

func extOf(name string, srv *updateext.Server) ext {
	return ext{name: name, url: srv.URL(), ca: string(srv.CABundle())}
}

func (e ext) hcl() string {
	var b strings.Builder
	fmt.Fprintf(&b, "    {\n      name = %q\n      url  = %q\n", e.name, e.url)
	if e.ca != "" {
		fmt.Fprintf(&b, "      ca_bundle = <<-EOT\n%s      EOT\n", indentLines(e.ca, "        "))
	}
	if e.timeout != "" {
		fmt.Fprintf(&b, "      timeout = %q\n", e.timeout)
	}
	b.WriteString("    },\n")
	return b.String()
}

func extensionsHCL(exts ...ext) string {
	var b strings.Builder
	b.WriteString("  extensions = [\n")
	for _, e := range exts {
		b.WriteString(e.hcl())
	}
	b.WriteString("  ]\n")
	return b.String()
}

func indentLines(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + line + "\n")
	}
	return b.String()
}

// targetHCL is namespace, cluster and machine_deployment of the bed.
func (b *bed) targetHCL() string {
	return fmt.Sprintf("  namespace          = %q\n  cluster            = %q\n  machine_deployment = %q\n", b.f.Namespace, b.cluster, b.cluster+"-md")
}

func strs(s ...string) knownvalue.Check {
	checks := make([]knownvalue.Check, len(s))
	for i, v := range s {
		checks[i] = knownvalue.StringExact(v)
	}
	return knownvalue.ListExact(checks)
}

// deleteMachineObjects removes what AddMachineDeployment wrote for cluster (RemoveWorkload
// removes only the Cluster and its Secret), so a shared fleet does not collect Machines.
func deleteMachineObjects(t *testing.T, f *testbed.Fleet, cluster string) {
	mc, err := f.ManagementClient()
	if err != nil {
		t.Errorf("clean up machines of %s: %v", cluster, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"},
		{Group: testbed.InfrastructureGroup, Version: "v1beta1", Kind: "GradualMachine"},
		{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := mc.DeleteAllOf(ctx, u, client.InNamespace(f.Namespace), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": cluster}); err != nil {
			t.Errorf("clean up %s of %s: %v", gvk.Kind, cluster, err)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
		{Group: testbed.InfrastructureGroup, Version: "v1beta1", Kind: "GradualMachineTemplate"},
		{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(f.Namespace)
		u.SetName(cluster + "-md")
		if err := mc.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean up %s %s: %v", gvk.Kind, u.GetName(), err)
		}
	}
}
