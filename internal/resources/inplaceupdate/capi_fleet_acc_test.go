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
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

func fleetConfig(f *testbed.Fleet) string { return fleetConfigOn(f, "v1.34.1") }

func fleetConfigOn(f *testbed.Fleet, version string) string {
	return acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_inplace_update" "fleet" {
  namespace                   = %q
  selector                    = { match_labels = { %q = "yes" } }
  machine_deployment_selector = {}
  version                     = %q
  canary                      = ["mem-2"]
  update_limit                = "1"
  max_failures                = "0"
  fallback                    = "none"
  verify                      = { timeout = "45s" }
}
`, testbed.DefaultClusterAPINamespace, fleetLabel, version)
}

// The fleet form against the real controllers: three clusters picked by label, each one's
// MachineDeployments (`{}`), one cluster at a time, mem-2 first (canary); CAPI's test extension
// covers the version bump. The kubelet stand-in plays for mem-2 and mem-4 only, so mem-3's
// machine never reports the new version: mem-3 fails verification and, with max_failures 0, the
// update halts. mem-4 is not touched (its MachineDeployment keeps its version and carries no
// revision), mem-2 keeps its update (nothing is rolled back). Applied again, once the kubelet
// plays for mem-3 as well, mem-2 is current and left alone, mem-3 (written already) is verified
// again and mem-4 updated; every worker was updated in place (the same Machine UID). A third
// plan is empty.
//
// The plan is the contract: the create's waves (and the replacement's, after the failed create
// tainted it) come from live reads, so they are known after apply; an update's are cut from the
// refreshed state, so Terraform's plan during apply comes out
// the same. A fourth step plans v1.34.2 over the three clusters, then relabels mem-4 out of the
// selector between `plan -out` and `apply`: the apply is not an "inconsistent final plan", mem-2
// and mem-3 are updated in place, and mem-4 is not touched (same MachineDeployment
// resourceVersion, same worker Machine).
func TestAccCAPIInPlace_fleetWavesHalt(t *testing.T) {
	acctest.OnOneLane(t, fleetLane) // the fleet's pacing against the controllers, not how a CLI drives it
	f, mc := capiFleet(t)
	k := playKubelet(t, mc, "mem-2", "mem-4")
	before := map[string]types.UID{}
	for _, c := range fleetClusters {
		before[c] = workerOf(t, mc, c).UID
	}
	const version, next = "v1.34.1", "v1.34.2"
	const res = "gradual_inplace_update.fleet"
	var mem4 clusterv1.MachineDeployment
	var mem4Worker types.UID
	t.Cleanup(func() {
		if err := relabel(context.Background(), mc, "mem-4", "yes"); err != nil {
			t.Errorf("relabelling mem-4 back: %v", err)
		}
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: fleetConfig(f),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// A create has no refreshed state to plan from: the waves as the fleet reads now
					// are a warning, and apply reads it again.
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("waves")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("summary")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("attention")),
				}},
				ExpectError: regexp.MustCompile(`(?s)In-Place Update Failed.*cluster mem-3 \(failed\): apply ip-[0-9a-f]+: In-Place Update Not Verified`),
			},
			{
				PreConfig: func() {
					if md := mdOf(t, mc, "mem-4"); md.Spec.Template.Spec.Version != "v1.34.0" || md.Annotations[owners.AnnotationRevision] != "" {
						t.Errorf("mem-4 touched after the halt: version %s, revision %q", md.Spec.Template.Spec.Version, md.Annotations[owners.AnnotationRevision])
					}
					if md := mdOf(t, mc, "mem-3"); md.Spec.Template.Spec.Version != version {
						t.Errorf("mem-3's MachineDeployment not written: version %s", md.Spec.Template.Spec.Version)
					}
					checkUpdatedInPlace(t, mc, "mem-2", before["mem-2"], version)
				},
				Config: fleetConfig(f),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// mem-2, the canary, is done: no canary wave is left.
					// The failed create tainted the resource: this is a replacement, a create with no
					// refreshed state to plan from, so the waves are known after apply.
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionReplace),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("waves")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("summary")),
					// The kubelet plays for mem-3 from a little after the plan: Terraform plans again
					// when it applies, and nothing it planned may come out different.
					checkFunc(func(context.Context) error {
						time.AfterFunc(10*time.Second, func() { k.Play("mem-3") })
						return nil
					}),
				}},
				Check: func(*terraform.State) error {
					for _, c := range fleetClusters {
						checkUpdatedInPlace(t, mc, c, before[c], version)
					}
					return nil
				},
				ConfigStateChecks: []statecheck.StateCheck{
					// Apply's own reading: mem-2 (the canary) done, mem-3 and mem-4 changed.
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.StringExact("2 waves of 1 cluster")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("summary"), knownvalue.MapPartial(map[string]knownvalue.Check{
						"current": knownvalue.Int64Exact(1), "changing": knownvalue.Int64Exact(2)})),
				},
			},
			{
				// Nothing left to do: the resource plans no change, and the plan data source, asked
				// the same question, finds every worker of the three clusters as desired.
				Config: fleetConfig(f) + fmt.Sprintf(`
data "gradual_inplace_update_plan" "fleet" {
  namespace                   = %q
  selector                    = { match_labels = { %q = "yes" } }
  machine_deployment_selector = {}
  version                     = "v1.34.1"
}
`, testbed.DefaultClusterAPINamespace, fleetLabel),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionNoop)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.gradual_inplace_update_plan.fleet", tfjsonpath.New("counts"), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"total": knownvalue.Int64Exact(3), "unchanged": knownvalue.Int64Exact(3)})),
					statecheck.ExpectKnownValue("data.gradual_inplace_update_plan.fleet", tfjsonpath.New("clusters"), knownvalue.MapSizeExact(3)),
					statecheck.ExpectKnownValue("data.gradual_inplace_update_plan.fleet", tfjsonpath.New("skipped"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				},
			},
			{
				// A saved plan of v1.34.2 over the three clusters; mem-4 relabelled out of the
				// selector before it is applied.
				Config: fleetConfigOn(f, next),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.StringExact("3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster")),
					checkFunc(func(ctx context.Context) error {
						mem4 = mdOf(t, mc, "mem-4")
						mem4Worker = workerOf(t, mc, "mem-4").UID
						return relabel(ctx, mc, "mem-4", "")
					}),
				}},
				Check: func(*terraform.State) error {
					for _, c := range []string{"mem-2", "mem-3"} {
						checkUpdatedInPlace(t, mc, c, before[c], next)
					}
					if md := mdOf(t, mc, "mem-4"); md.ResourceVersion != mem4.ResourceVersion || md.Spec.Template.Spec.Version != version {
						t.Errorf("mem-4, relabelled out after the plan, was written: resourceVersion %s → %s, version %s", mem4.ResourceVersion, md.ResourceVersion, md.Spec.Template.Spec.Version)
					}
					if uid := workerOf(t, mc, "mem-4").UID; uid != mem4Worker {
						t.Errorf("mem-4's worker replaced (%s → %s)", mem4Worker, uid)
					}
					return nil
				},
			},
		},
	})
}

// relabel sets the fleet label of cluster to value ("" removes it).
func relabel(ctx context.Context, mc client.Client, cluster, value string) error {
	var c clusterv1.Cluster
	if err := mc.Get(ctx, client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: cluster}, &c); err != nil {
		return err
	}
	patch := client.MergeFrom(c.DeepCopy())
	if value == "" {
		delete(c.Labels, fleetLabel)
	} else {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[fleetLabel] = value
	}
	return mc.Patch(ctx, &c, patch)
}

// checkUpdatedInPlace fails t unless cluster's worker is the same Machine (uid) on version, its
// MachineDeployment too, and its Node's kubelet reports it.
func checkUpdatedInPlace(t *testing.T, mc client.Client, cluster string, uid types.UID, version string) {
	t.Helper()
	m := workerOf(t, mc, cluster)
	if m.UID != uid {
		t.Errorf("%s: worker Machine replaced (%s → %s), not updated in place", cluster, uid, m.UID)
	}
	if m.Spec.Version != version {
		t.Errorf("%s: worker Machine on %s, want %s", cluster, m.Spec.Version, version)
	}
	if md := mdOf(t, mc, cluster); md.Spec.Template.Spec.Version != version {
		t.Errorf("%s: MachineDeployment on %s, want %s", cluster, md.Spec.Template.Spec.Version, version)
	}
	wc, err := workloadClient(context.Background(), mc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := wc.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Status.NodeInfo.KubeletVersion != version {
		t.Errorf("%s: Node %s kubelet %s, want %s", cluster, n.Name, n.Status.NodeInfo.KubeletVersion, version)
	}
}

func mdOf(t *testing.T, mc client.Client, cluster string) clusterv1.MachineDeployment {
	t.Helper()
	var md clusterv1.MachineDeployment
	if err := mc.Get(context.Background(), client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: cluster + "-md-0"}, &md); err != nil {
		t.Fatal(err)
	}
	return md
}
