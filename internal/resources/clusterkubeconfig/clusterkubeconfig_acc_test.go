package clusterkubeconfig_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

func TestMain(m *testing.M) { acctest.Main(m) }

// The ephemeral kubeconfig of a workload cluster reaches a consumer (the echo test provider
// stands in for the kubernetes/helm providers, which cannot be built from the module proxy
// here), and the credentials it hands over really open that cluster's API server.
func TestAccClusterKubeconfig_credentialsReachTheCluster(t *testing.T) {
	f := acctest.Fleet(t)
	want := f.Workloads["prod-eu-1"]
	pending := acctest.UniqueLabel("pending")
	addPending(t, f, pending)
	factories := map[string]func() (tfprotov6.ProviderServer, error){"echo": echoprovider.NewProviderServer()}
	for name, factory := range acctest.ProviderFactories {
		factories[name] = factory
	}
	resource.Test(t, resource.TestCase{
		// Ephemeral resources: Terraform 1.10+, OpenTofu 1.11+ (which reports itself as 1.11+ too).
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_10_0)},
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:            acctest.ProviderConfig(f) + echoConfig(f.Namespace, "prod-eu-1"),
				ConfigStateChecks: []statecheck.StateCheck{credentialsOpen{resource: "echo.cluster", host: want.Server}},
			},
			{
				// A Cluster that does not exist: a clear error at plan, naming it.
				Config:      acctest.ProviderConfig(f) + echoConfig(f.Namespace, "no-such-cluster"),
				ExpectError: regexp.MustCompile(`there is no Cluster fleet/no-such-cluster`),
			},
			{
				// A Cluster whose control plane has no kubeconfig Secret yet.
				Config:      acctest.ProviderConfig(f) + echoConfig(f.Namespace, pending),
				ExpectError: regexp.MustCompile(`(?s)has no kubeconfig Secret.*` + pending + `-kubeconfig yet`),
			},
			{
				// Back to a cluster that opens, so that the test's final destroy can plan.
				Config: acctest.ProviderConfig(f) + echoConfig(f.Namespace, "prod-eu-1"),
			},
		},
	})
}

// echoConfig hands the ephemeral kubeconfig of namespace/name to the echo provider, which writes
// it to the state of `echo.cluster` for the test to read.
func echoConfig(namespace, name string) string {
	return fmt.Sprintf(`
ephemeral "gradual_cluster_kubeconfig" "cluster" {
  namespace = %q
  name      = %q
}

provider "echo" {
  data = ephemeral.gradual_cluster_kubeconfig.cluster
}

resource "echo" "cluster" {}
`, namespace, name)
}

// addPending registers a Cluster whose control plane is not initialized (no kubeconfig Secret)
// and removes it when the test ends.
func addPending(t *testing.T, f *testbed.Fleet, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: name, Labels: map[string]string{"run": name}, NoKubeconfig: true}); err != nil {
		t.Fatalf("add workload %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.RemoveWorkload(ctx, name); err != nil {
			t.Errorf("remove workload %s: %v", name, err)
		}
	})
}

// credentialsOpen checks that the echoed credentials name the expected API server and that a
// client built only from them (CA, client certificate and key) reads its version.
type credentialsOpen struct{ resource, host string }

func (c credentialsOpen) CheckState(ctx context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	if req.State == nil || req.State.Values == nil || req.State.Values.RootModule == nil {
		resp.Error = fmt.Errorf("no state")
		return
	}
	var data map[string]any
	for _, r := range req.State.Values.RootModule.Resources {
		if r.Address == c.resource {
			data, _ = r.AttributeValues["data"].(map[string]any)
		}
	}
	if data == nil {
		resp.Error = fmt.Errorf("%s has no echoed data", c.resource)
		return
	}
	str := func(k string) string { s, _ := data[k].(string); return s }
	if str("host") != c.host {
		resp.Error = fmt.Errorf("host = %q, want %q", str("host"), c.host)
		return
	}
	if str("cluster_ca_certificate") == "" || str("kubeconfig") == "" || (str("token") == "" && str("client_key") == "") {
		resp.Error = fmt.Errorf("credentials incomplete: CA %t, kubeconfig %t, token %t, client key %t",
			str("cluster_ca_certificate") != "", str("kubeconfig") != "", str("token") != "", str("client_key") != "")
		return
	}
	cfg := &rest.Config{Host: str("host"), BearerToken: str("token"), TLSClientConfig: rest.TLSClientConfig{
		ServerName: str("tls_server_name"),
		CAData:     []byte(str("cluster_ca_certificate")),
		CertData:   []byte(str("client_certificate")),
		KeyData:    []byte(str("client_key")),
	}}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		resp.Error = err
		return
	}
	if _, err := dc.ServerVersion(); err != nil {
		resp.Error = fmt.Errorf("the handed-out credentials do not open %s: %w", c.host, err)
	}
}
