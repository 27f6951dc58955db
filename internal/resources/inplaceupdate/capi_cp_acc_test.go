package inplaceupdate_test

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

const controlPlane = memCluster + "-control-plane"

// controlPlaneMachine is the KubeadmControlPlane's one Machine, once CAPI has settled it: one
// Machine, not being deleted, UpToDate.
func controlPlaneMachine(t *testing.T, mc client.Client) clusterv1.Machine {
	t.Helper()
	var live clusterv1.Machine
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list clusterv1.MachineList
		if err := mc.List(ctx, &list, client.InNamespace(testbed.DefaultClusterAPINamespace), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: controlPlane}); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // a failed read is retried until the timeout
		}
		var states []string
		n := 0
		for _, m := range list.Items {
			up := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			states = append(states, fmt.Sprintf("%s deleting=%v upToDate=%v", m.Name, !m.DeletionTimestamp.IsZero(), up))
			if m.DeletionTimestamp.IsZero() && up {
				live, n = m, n+1
			}
		}
		last = strings.Join(states, "; ")
		return len(list.Items) == 1 && n == 1, nil
	})
	if err != nil {
		t.Fatalf("control plane Machines not settled: %v; last: %s", err, last)
	}
	return live
}

// The preview of a control plane: a one-replica KubeadmControlPlane rolls out with maxSurge 1
// (its default; 0 needs three replicas), so even a change CAPI's test extension covers replaces
// the Machine. The plan says so (rolling, naming maxSurge) and CAPI does it: a new Machine on
// the new version, the old one gone, status `replaced` and `created`.
func TestAccCAPIInPlace_controlPlaneReplacedAsPreviewed(t *testing.T) {
	acctest.OnOneLane(t, 1) // what Cluster API does with the write, not how a CLI drives it
	f, mc := capiFleet(t)
	before := controlPlaneMachine(t, mc)
	const version = "v1.34.3"
	const res = "gradual_inplace_update.cp"
	cfg := acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_inplace_update" "cp" {
  namespace     = %q
  cluster       = %q
  control_plane = %q
  version       = %q
  fallback      = "rolling"
  verify        = { timeout = "4m" }
}
`, testbed.DefaultClusterAPINamespace, memCluster, controlPlane, version)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(res, tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact(before.Name)),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("strategy"), knownvalue.StringExact("rolling")),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("notes"),
						knownvalue.ListPartial(map[int]knownvalue.Check{0: knownvalue.StringRegexp(regexp.MustCompile(`maxSurge 1`))})),
				}},
				Check: func(s *terraform.State) error {
					after := controlPlaneMachine(t, mc)
					if after.UID == before.UID {
						return fmt.Errorf("control plane Machine %s kept: the preview said CAPI replaces it", before.Name)
					}
					if after.Spec.Version != version {
						return fmt.Errorf("control plane Machine %s on %s, want %s", after.Name, after.Spec.Version, version)
					}
					attrs := s.RootModule().Resources[res].Primary.Attributes
					if attrs["status."+before.Name] != "replaced" || attrs["status."+after.Name] != "created" {
						return fmt.Errorf("status %s=%q, %s=%q; want replaced and created", before.Name, attrs["status."+before.Name], after.Name, attrs["status."+after.Name])
					}
					t.Logf("preview rolling (maxSurge 1); KubeadmControlPlane replaced Machine %s by %s on %s", before.Name, after.Name, version)
					return nil
				},
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}
