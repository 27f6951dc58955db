package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// valuesManifests is one bundle for every cluster: the zone comes from a Cluster label, the
// tier from the configuration (a default otherwise), the name from the Cluster itself.
func valuesManifests(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  cluster: "${cluster_name}"
  zone: "${zone}"
  tier: "${tier:=standard}"
  literal: "$${zone}"
`, ns)
}

// setClusterLabel sets (or, with value "", removes) a label of the CAPI Cluster name.
func setClusterLabel(t *testing.T, f *testbed.Fleet, name, key, value string) {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	var v any = value
	if value == "" {
		v = nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	cl := &clusterv1.Cluster{}
	cl.Namespace, cl.Name = f.Namespace, name
	if err := mc.Patch(context.Background(), cl, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// expectSettings checks each cluster's ConfigMap: its own name, its zone, its tier.
func expectValueSettings(f *testbed.Fleet, ns string, want map[string][2]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		for cluster, zt := range want {
			c, err := f.WorkloadClient(cluster)
			if err != nil {
				return err
			}
			var cm corev1.ConfigMap
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
				return fmt.Errorf("%s: %w", cluster, err)
			}
			if cm.Data["cluster"] != cluster || cm.Data["zone"] != zt[0] || cm.Data["tier"] != zt[1] || cm.Data["literal"] != "${zone}" {
				return fmt.Errorf("%s: settings %v, want cluster %s, zone %s, tier %s and the escaped literal", cluster, cm.Data, cluster, zt[0], zt[1])
			}
		}
		return nil
	}
}

// One bundle with per-cluster values: rendered differently on three clusters; a label change on
// one cluster plans an update of that cluster only (values-changed in `attention`, one wave of
// one cluster, the others' records untouched); a cluster missing a variable refuses the plan,
// naming the cluster and the variable.
func TestAccRollout_values(t *testing.T) {
	acctest.OnOneLane(t, 0) // what each cluster is given, not how a CLI drives the provider
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("values")
	key := "values.gradual.dev/" + name
	t.Cleanup(func() {
		for _, c := range []string{"prod-eu-1", "prod-us-1", "staging-eu-1"} {
			setClusterLabel(t, f, c, key, "")
		}
	})
	for c, zone := range map[string]string{"prod-eu-1": "eu-a", "prod-us-1": "us-a", "staging-eu-1": "eu-b"} {
		setClusterLabel(t, f, c, key, zone)
	}
	// In HCL, $${ is a literal ${ (Terraform would interpolate it otherwise).
	config := rolloutConfig(f, name, allThree, strings.ReplaceAll(valuesManifests(name), "${", "$${"), fmt.Sprintf(`update_limit = "3"
  values = {
    from_labels = { zone = %q }
    clusters    = { "prod-us-1" = { tier = "premium" } }
  }`, key))
	appliedAt := map[string]time.Time{}
	keepAppliedAt := func(*terraform.State) error {
		for _, c := range []string{"prod-us-1", "staging-eu-1"} {
			appliedAt[c] = workloadRecords(t, f, c, name).Current.AppliedAt
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: resource.ComposeTestCheckFunc(expectValueSettings(f, name, map[string][2]string{
					"prod-eu-1": {"eu-a", "standard"}, "prod-us-1": {"us-a", "premium"}, "staging-eu-1": {"eu-b", "standard"},
				}), keepAppliedAt),
			},
			{
				// prod-eu-1 moves zone: the refresh finds it alone values-changed, and the plan
				// updates it alone.
				PreConfig: func() { setClusterLabel(t, f, "prod-eu-1", key, "eu-c") },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					attentionBefore{cluster: "prod-eu-1", want: []string{"values-changed: ", "ConfigMap " + name + "/settings"}},
					attentionOnly{clusters: []string{"prod-eu-1"}},
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				Check: resource.ComposeTestCheckFunc(
					expectValueSettings(f, name, map[string][2]string{"prod-eu-1": {"eu-c", "standard"}}),
					func(*terraform.State) error {
						for c, at := range appliedAt {
							if got := workloadRecords(t, f, c, name).Current.AppliedAt; !got.Equal(at) {
								return fmt.Errorf("%s was applied again (%s, before %s): only prod-eu-1's values changed", c, got, at)
							}
						}
						return nil
					},
				),
			},
			{
				// staging-eu-1 loses the label: nothing can be rendered for it, and the plan is
				// refused, naming it and the variable.
				PreConfig:   func() { setClusterLabel(t, f, "staging-eu-1", key, "") },
				Config:      config,
				ExpectError: regexp.MustCompile(`(?s)Missing Variable.*staging-eu-1: variable zone not set`),
			},
		},
	})
}

// attentionOnly checks that the refreshed state before the plan lists exactly these clusters
// in `attention`.
type attentionOnly struct{ clusters []string }

func (a attentionOnly) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != "gradual_rollout.test" || rc.Change == nil {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		attention, _ := before["attention"].(map[string]any)
		var got []string
		for name := range attention {
			got = append(got, name)
		}
		sort.Strings(got)
		if !slices.Equal(got, a.clusters) {
			resp.Error = fmt.Errorf("attention before the plan lists %v, want %v (%v)", got, a.clusters, attention)
		}
		return
	}
	resp.Error = fmt.Errorf("the plan has no change to gradual_rollout.test")
}
