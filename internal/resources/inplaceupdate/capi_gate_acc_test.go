package inplaceupdate_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// With Cluster API's InPlaceUpdates feature gate off (its default in v1.14), on a fleet of its
// own whose core and KubeadmControlPlane managers run with InPlaceUpdates=false (recorded, as
// clusterctl installs them, in their Deployments): a version bump CAPI's test extension covers
// (in place with the gate on, TestAccCAPIInPlace_versionBumpInPlace) is refused at plan with
// fallback "none", naming the machine and the gate, and previewed as a replacement with fallback
// "rolling"; CAPI then does replace the Machine. The Machine's Updating condition is there with
// the gate off as with it on (False, NotUpdating), which is why the plan reads the managers'
// flags instead.
func TestAccCAPIInPlace_gateOff(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the provider does when the gate is off, not how a CLI drives it
	tc := capiToolchain(t)
	capi.stop() // one Cluster API fleet per machine: the shared one (gate on) goes first
	t0 := time.Now()
	lock, err := lockCAPI()
	if err != nil {
		t.Fatal(err)
	}
	var f *testbed.Fleet
	t.Cleanup(func() { stopCAPIFleet(f, lock) })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if f, err = testbed.Up(ctx, tc, testbed.Options{ClusterAPI: true, InPlaceUpdatesOff: true, Logf: t.Logf}); err != nil {
		t.Fatal(err)
	}
	if err := f.RegisterTestExtension(ctx, extensionName); err != nil {
		t.Fatal(err)
	}
	if err := f.ProvisionInMemory(ctx, testbed.InMemoryCluster{Name: memCluster, ControlPlaneVersion: "v1.34.2", WorkerVersion: "v1.34.0", InPlaceRollout: true}); err != nil {
		t.Fatal(err)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Cluster API fleet with InPlaceUpdates off and in-memory cluster %s ready in %s", memCluster, time.Since(t0).Round(time.Second))
	playKubelet(t, mc)
	before := worker(t, mc)
	if c := meta.FindStatusCondition(before.Status.Conditions, clusterv1.MachineUpdatingCondition); c == nil || c.Status != "False" || c.Reason != clusterv1.MachineNotUpdatingReason {
		t.Errorf("worker Machine %s Updating condition %+v; want False, %s (set whatever the gate)", before.Name, c, clusterv1.MachineNotUpdatingReason)
	}
	md := machineDeployment(t, mc)
	const version = "v1.34.1"
	planned := func(field string) tfjsonpath.Path { return tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey(field) }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: config(f, `  version  = "`+version+`"
  fallback = "none"`),
				ExpectError: regexp.MustCompile(`(?s)Machines Cannot Be Updated In Place.*machine\s+` + regexp.QuoteMeta(before.Name) +
					`:\s+Cluster\s+API's\s+InPlaceUpdates\s+feature\s+gate\s+is\s+off`),
			},
			{
				PreConfig: func() {
					if now := machineDeployment(t, mc); now.Generation != md.Generation {
						t.Errorf("MachineDeployment written by a refused plan: generation %d → %d", md.Generation, now.Generation)
					}
				},
				Config: config(f, `  version  = "`+version+`"
  fallback = "rolling"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_inplace_update.workers", planned("name"), knownvalue.StringExact(before.Name)),
					plancheck.ExpectKnownValue("gradual_inplace_update.workers", planned("strategy"), knownvalue.StringExact("rolling")),
					plancheck.ExpectKnownValue("gradual_inplace_update.workers", planned("extensions"), knownvalue.ListExact([]knownvalue.Check{})),
					plancheck.ExpectKnownValue("gradual_inplace_update.workers", planned("uncovered_fields"), knownvalue.ListExact([]knownvalue.Check{})),
					plancheck.ExpectKnownValue("gradual_inplace_update.workers", planned("notes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(owners.GateOffNote)})),
				}},
				Check: func(s *terraform.State) error {
					after := worker(t, mc)
					if after.UID == before.UID {
						return fmt.Errorf("worker Machine %s (%s) kept: with the gate off CAPI replaces it", before.Name, before.UID)
					}
					if after.Spec.Version != version {
						return fmt.Errorf("worker Machine %s on %s, want %s", after.Name, after.Spec.Version, version)
					}
					attrs := s.RootModule().Resources["gradual_inplace_update.workers"].Primary.Attributes
					if attrs["status."+before.Name] != "replaced" || attrs["status."+after.Name] != "created" {
						return fmt.Errorf("status %s=%q, %s=%q; want replaced and created", before.Name, attrs["status."+before.Name], after.Name, attrs["status."+after.Name])
					}
					t.Logf("gate off: preview rolling (%s); CAPI replaced Machine %s (%s) by %s (%s) on %s", owners.GateOffNote, before.Name, before.UID, after.Name, after.UID, version)
					return nil
				},
			},
		},
	})
}
