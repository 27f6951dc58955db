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
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
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

// cpCluster is an in-memory cluster with a three-replica KubeadmControlPlane rolled out with
// maxSurge 0: the shape in which Cluster API v1.14 updates control plane Machines in place
// (provisioned with the shared fleet, see provision).
const cpCluster = "mem-cp3"

// controlPlaneMachines are cluster's n KubeadmControlPlane Machines, once CAPI has settled them:
// n Machines, none being deleted, each UpToDate, not Updating, with a Node.
func controlPlaneMachines(t *testing.T, mc client.Client, cluster string, n int) []clusterv1.Machine {
	t.Helper()
	var list clusterv1.MachineList
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := mc.List(ctx, &list, client.InNamespace(testbed.DefaultClusterAPINamespace),
			client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: cluster + "-control-plane"}); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // a failed read is retried until the timeout
		}
		var states []string
		settled := 0
		for _, m := range list.Items {
			up := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			updating := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition)
			states = append(states, fmt.Sprintf("%s deleting=%v upToDate=%v updating=%v", m.Name, !m.DeletionTimestamp.IsZero(), up, updating))
			if m.DeletionTimestamp.IsZero() && up && !updating && m.Status.NodeRef.IsDefined() {
				settled++
			}
		}
		last = strings.Join(states, "; ")
		return len(list.Items) == n && settled == n, nil
	})
	if err != nil {
		t.Fatalf("control plane Machines of %s not settled: %v; last: %s", cluster, err, last)
	}
	return list.Items
}

// A version bump of a three-replica KubeadmControlPlane with maxSurge 0, which CAPI's test
// extension covers: the plan previews every control plane Machine in place by test-extension,
// and KubeadmControlPlane does update them in place, one at a time (it only updates in place a
// Machine it would otherwise delete: with maxSurge 0 it never creates one first). After apply the
// same three Machines (same UIDs) are on the new version, their Nodes' kubelets too, and status
// says each was updated; a second plan is empty.
func TestAccCAPIInPlace_controlPlaneInPlace(t *testing.T) {
	acctest.OnOneLane(t, controlPlaneLane) // what Cluster API does with the write, not how a CLI drives it
	f, mc := capiFleet(t)
	playKubelet(t, mc, cpCluster)
	before := controlPlaneMachines(t, mc, cpCluster, 3)
	names := make([]string, len(before))
	for i, m := range before {
		names[i] = regexp.QuoteMeta(m.Name)
	}
	anyMachine := regexp.MustCompile(`^(` + strings.Join(names, "|") + `)$`)
	const version = "v1.34.3"
	const res = "gradual_inplace_update.cp"
	cfg := acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_inplace_update" "cp" {
  namespace     = %q
  cluster       = %q
  control_plane = %q
  version       = %q
  fallback      = "none"
  verify        = { timeout = "5m" }
}
`, testbed.DefaultClusterAPINamespace, cpCluster, cpCluster+"-control-plane", version)
	var preview []plancheck.PlanCheck
	for i := range before {
		m := tfjsonpath.New("plan").AtSliceIndex(i)
		preview = append(preview,
			plancheck.ExpectKnownValue(res, m.AtMapKey("name"), knownvalue.StringRegexp(anyMachine)),
			plancheck.ExpectKnownValue(res, m.AtMapKey("strategy"), knownvalue.StringExact("in-place")),
			plancheck.ExpectKnownValue(res, m.AtMapKey("extensions"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(extensionName)})))
	}
	wantStatus := map[string]knownvalue.Check{}
	for _, m := range before {
		wantStatus[m.Name] = knownvalue.StringExact("updated")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config:            cfg,
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: preview},
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(res, tfjsonpath.New("status"), knownvalue.MapExact(wantStatus))},
				Check: func(*terraform.State) error {
					after := controlPlaneMachines(t, mc, cpCluster, 3)
					uids := map[string]bool{}
					for _, m := range before {
						uids[string(m.UID)] = true
					}
					wc, err := workloadClient(context.Background(), mc, cpCluster)
					if err != nil {
						return err
					}
					var kept []string
					for _, m := range after {
						if !uids[string(m.UID)] {
							return fmt.Errorf("control plane Machine %s (UID %s) is new: KubeadmControlPlane did not update in place", m.Name, m.UID)
						}
						if m.Spec.Version != version {
							return fmt.Errorf("control plane Machine %s on %s, want %s", m.Name, m.Spec.Version, version)
						}
						var n corev1.Node
						if err := wc.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, &n); err != nil {
							return err
						}
						if n.Status.NodeInfo.KubeletVersion != version {
							return fmt.Errorf("Node %s of %s: kubelet %s, want %s", n.Name, m.Name, n.Status.NodeInfo.KubeletVersion, version)
						}
						kept = append(kept, fmt.Sprintf("%s (UID %s, Node %s)", m.Name, m.UID, n.Name))
					}
					t.Logf("preview in-place by %s for all 3; KubeadmControlPlane kept %s, all on %s",
						extensionName, strings.Join(kept, ", "), version)
					return nil
				},
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}
