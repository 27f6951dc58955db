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
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// serviceExtension is CAPI's test extension registered by Service only
// (testbed.RegisterTestExtensionService), while extensionName's URL registration is removed.
const serviceExtension = extensionName + "-svc"

// serviceLane runs the test with a Service-registered extension on one CLI: it tests what
// Cluster API does with such an extension and that the preview reaches it, not how a CLI drives
// the provider.
const serviceLane = 1

// extensionConfigObject is an ExtensionConfig to get or delete by name.
func extensionConfigObject(name string) *unstructured.Unstructured {
	ec := &unstructured.Unstructured{}
	ec.SetAPIVersion("runtime.cluster.x-k8s.io/v1beta2")
	ec.SetKind("ExtensionConfig")
	ec.SetName(name)
	return ec
}

// waitForHandlers waits until Cluster API's core manager has discovered name's handlers (it
// called the extension's discovery endpoint) and returns them.
func waitForHandlers(t *testing.T, mc client.Client, name string) []any {
	t.Helper()
	var handlers []any
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got := extensionConfigObject(name)
		if err := mc.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		handlers, _, _ = unstructured.NestedSlice(got.Object, "status", "handlers")
		return len(handlers) > 0, nil
	})
	if err != nil {
		t.Fatalf("Cluster API did not discover %s's handlers: %v", name, err)
	}
	return handlers
}

// CAPI's test extension registered only through an ExtensionConfig whose clientConfig names a
// Service (no URL registration left): Cluster API's managers call it at
// https://capi-test-extension.capi.svc:443 (reached through the test bed's stand-in for
// cluster DNS, which the core manager's discovery call and the in-place hooks go through), the
// preview through the management API server's service proxy. The plan says in place by that
// extension; after apply Cluster API did it in place: the same Machine UID, the Machine and its
// Node on the new version. Then the Service loses its ready endpoint: a version bump fails at
// plan naming the ExtensionConfig and the Service, and nothing is written.
func TestAccCAPIInPlace_extensionBehindService(t *testing.T) {
	acctest.OnOneLane(t, serviceLane)
	f, mc := capiFleet(t)
	playKubelet(t, mc)
	ctx := context.Background()
	before := worker(t, mc)
	version := otherVersion(before.Spec.Version)

	// Only the Service registration: the URL one goes, and comes back when the test ends
	// (cleanups run last first: the Service registration goes before it).
	if err := mc.Delete(ctx, extensionConfigObject(extensionName)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.RegisterTestExtension(context.Background(), extensionName); err != nil {
			t.Errorf("register %s again: %v", extensionName, err)
			return
		}
		waitForHandlers(t, mc, extensionName)
	})
	t.Cleanup(func() {
		if err := client.IgnoreNotFound(mc.Delete(context.Background(), extensionConfigObject(serviceExtension))); err != nil {
			t.Errorf("remove %s: %v", serviceExtension, err)
		}
		if err := f.RemoveTestExtensionService(context.Background()); err != nil {
			t.Errorf("remove the test extension's Service: %v", err)
		}
	})
	proxyLog, logged := managerLog(t, f, "svc-proxy")
	if err := f.RegisterTestExtensionService(ctx, serviceExtension, extensionName); err != nil {
		t.Fatal(err)
	}
	handlers := waitForHandlers(t, mc, serviceExtension)
	// The discovery call went through the stand-in for cluster DNS, to the Service's endpoint.
	svcHost := testbed.TestExtensionService + "." + testbed.DefaultClusterAPINamespace + ".svc:443"
	waitForLog(t, proxyLog, logged, "CONNECT "+svcHost+" → ")

	var preview string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: config(f, `  version  = "`+version+`"
  fallback = "none"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact(before.Name)),
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("strategy"), knownvalue.StringExact("in-place")),
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("extensions"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(serviceExtension)})),
				checkFunc(func(context.Context) error {
					preview = fmt.Sprintf("%s in-place by %s", before.Name, serviceExtension)
					return nil
				}),
			}},
			Check: func(*terraform.State) error {
				after := worker(t, mc)
				if after.UID != before.UID || after.Name != before.Name {
					return fmt.Errorf("worker Machine %s (%s) replaced by %s (%s): CAPI did not update it in place", before.Name, before.UID, after.Name, after.UID)
				}
				if after.Spec.Version != version {
					return fmt.Errorf("worker Machine on %s, want %s", after.Spec.Version, version)
				}
				kubelet, err := nodeVersion(mc, memCluster, after)
				if err != nil {
					return err
				}
				if kubelet != version {
					return fmt.Errorf("Node %s kubelet %s", after.Status.NodeRef.Name, kubelet)
				}
				// The in-place hooks too went to the Service.
				log, err := os.ReadFile(proxyLog)
				if err != nil {
					return err
				}
				tunnels := strings.Count(string(log[logged:]), "CONNECT "+svcHost+" → ")
				t.Logf("preview: %s (%d handlers discovered by Cluster API through %s); Cluster API: Machine %s kept UID %s, %s → %s, Node %s kubelet %s; %d connection(s) through the stand-in for cluster DNS",
					preview, len(handlers), svcHost, after.Name, after.UID, before.Spec.Version, after.Spec.Version, after.Status.NodeRef.Name, kubelet, tunnels)
				return nil
			},
		}},
	})

	// The Service without a ready endpoint: refused at plan, nothing written.
	if err := f.SetTestExtensionServiceReady(ctx, false); err != nil {
		t.Fatal(err)
	}
	md := machineDeployment(t, mc)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: config(f, `  version  = "`+otherVersion(md.Spec.Template.Spec.Version)+`"
  fallback = "none"`),
			ExpectError: regexp.MustCompile(`(?s)Update Extension Not Reachable.*ExtensionConfig\s+` + regexp.QuoteMeta(serviceExtension) +
				`\s+names\s+Service\s+` + testbed.DefaultClusterAPINamespace + `/` + testbed.TestExtensionService + `\s+port\s+443,\s+which\s+has\s+no\s+ready\s+endpoint`),
		}},
	})
	if now := machineDeployment(t, mc); now.Generation != md.Generation || now.Spec.Template.Spec.Version != md.Spec.Template.Spec.Version {
		t.Errorf("MachineDeployment written by a refused plan: generation %d → %d, version %s → %s",
			md.Generation, now.Generation, md.Spec.Template.Spec.Version, now.Spec.Template.Spec.Version)
	}
}
