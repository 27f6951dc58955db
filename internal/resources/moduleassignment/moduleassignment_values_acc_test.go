package moduleassignment_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// setClusterLabel sets (or, with value "", removes) one label of a workload Cluster, keeping
// the others.
func setClusterLabel(t *testing.T, f *testbed.Fleet, cluster, key, value string) {
	t.Helper()
	labels := maps.Clone(f.Workloads[cluster].Spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if value == "" {
		delete(labels, key)
	} else {
		labels[key] = value
	}
	if err := f.SetLabels(context.Background(), cluster, labels); err != nil {
		t.Fatal(err)
	}
}

// valuesModules are two modules of one template each: base takes the zone from a Cluster label
// and the cluster's own name; app (after base) takes a tier from the configuration, with a
// default. In HCL, $${ is a literal ${.
func valuesModules(ns, appNote string) []module {
	base := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: zone
  namespace: %[1]s
data:
  cluster: "$${cluster_name}"
  zone: "$${zone}"
`, ns)
	app := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: %s
data:
  tier: "$${tier:=standard}"
  literal: "$$${zone}"
  note: %q
`, ns, appNote)
	return []module{{name: "base", version: "1", manifests: base}, {name: "app", version: "1", manifests: app, dependsOn: []string{"base"}}}
}

// expectRendered checks what each cluster got: its own name and zone from base, its tier and the
// escaped literal from app.
func expectRendered(f *testbed.Fleet, ns string, want map[string][2]string) error {
	for cluster, zt := range want {
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			return err
		}
		var zone, app corev1.ConfigMap
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "zone"}, &zone); err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, &app); err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		if zone.Data["cluster"] != cluster || zone.Data["zone"] != zt[0] || app.Data["tier"] != zt[1] || app.Data["literal"] != "${zone}" {
			return fmt.Errorf("%s: zone %v, app %v; want cluster %s, zone %s, tier %s and the escaped literal", cluster, zone.Data, app.Data, cluster, zt[0], zt[1])
		}
	}
	return nil
}

// appliedAt reads when each module's current revision was applied on each cluster, from the
// cluster's records.
func appliedAt(f *testbed.Fleet, name string, clusters ...string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, cluster := range clusters {
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			return nil, err
		}
		for _, m := range []string{"base", "app"} {
			key := records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + "." + m}
			state, err := records.NewWorkloadStore(c, "").LoadCurrent(context.Background(), key)
			if err != nil {
				return nil, err
			}
			if state.Current == nil {
				return nil, fmt.Errorf("%s: module %s has no current record", cluster, m)
			}
			out[cluster+"/"+m] = state.Current.AppliedAt
		}
	}
	return out, nil
}

// attentionOnly checks that the refreshed state before the plan names exactly these clusters in
// `attention`.
type attentionOnly struct {
	res      string
	clusters []string
}

func (a attentionOnly) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != a.res || rc.Change == nil {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		attention, _ := before["attention"].(map[string]any)
		if got := slices.Sorted(maps.Keys(attention)); !slices.Equal(got, a.clusters) {
			resp.Error = fmt.Errorf("attention before the plan names %v, want %v (%v)", got, a.clusters, attention)
		}
		return
	}
	resp.Error = fmt.Errorf("the plan has no change to %s", a.res)
}

// One assignment, per-cluster values: each module rendered differently on two clusters; a label
// change on one cluster plans an update of that cluster alone (values-changed in `attention`,
// one wave of the one module that changes), and apply changes that cluster alone; a cluster
// missing a variable refuses the plan, naming the cluster, the module and the variable, and
// nothing is applied (a change of the modules that the other cluster could take included).
func TestAccModuleAssignment_values(t *testing.T) {
	acctest.OnOneLane(t, 0) // what each cluster is given, not how a CLI drives the provider
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("values")
	zoneKey := "values.gradual.dev/" + name
	newLabeler(t, f, name, "prod-eu-1", "prod-us-1")
	t.Cleanup(func() {
		for _, c := range []string{"prod-eu-1", "prod-us-1"} {
			setClusterLabel(t, f, c, zoneKey, "")
		}
	})
	setClusterLabel(t, f, "prod-eu-1", zoneKey, "eu-a")
	setClusterLabel(t, f, "prod-us-1", zoneKey, "us-a")
	values := fmt.Sprintf(`update_limit = "2"
  values = {
    from_labels = { zone = %q }
    clusters    = { "prod-us-1" = { tier = "premium" } }
  }`, zoneKey)
	config := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, values, valuesModules(name, "v1")...)
	var before map[string]time.Time
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return expectSetting(f, "prod-eu-1", name, "zone", "<none>")
		},
		Steps: []resource.TestStep{
			{
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2}), noAttention(res)},
				Check: func(*terraform.State) (err error) {
					if err := expectRendered(f, name, map[string][2]string{"prod-eu-1": {"eu-a", "standard"}, "prod-us-1": {"us-a", "premium"}}); err != nil {
						return err
					}
					before, err = appliedAt(f, name, "prod-eu-1", "prod-us-1")
					return err
				},
			},
			{
				// The management cluster's record keeps `values`: import restores them.
				ResourceName: res, ImportState: true, ImportStateId: f.Namespace + "/" + name,
				ImportStateVerify: true, ImportStateVerifyIdentifierAttribute: "id", ImportStateVerifyIgnore: []string{"timeouts", "waves"},
			},
			{
				// prod-eu-1 moves zone: the refresh finds it alone values-changed (module base), and
				// the plan updates base there alone.
				PreConfig: func() { setClusterLabel(t, f, "prod-eu-1", zoneKey, "eu-b") },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					attentionBefore{res: res, cluster: "prod-eu-1", want: []string{"values-changed: ", "module base renders differently", "ConfigMap " + name + "/zone"}},
					attentionOnly{res: res, clusters: []string{"prod-eu-1"}},
					plancheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.MapExact(map[string]knownvalue.Check{
						"base": knownvalue.StringExact("1 wave of 1 cluster"),
					})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2}), noAttention(res)},
				Check: func(*terraform.State) error {
					if err := expectRendered(f, name, map[string][2]string{"prod-eu-1": {"eu-b", "standard"}, "prod-us-1": {"us-a", "premium"}}); err != nil {
						return err
					}
					after, err := appliedAt(f, name, "prod-eu-1", "prod-us-1")
					if err != nil {
						return err
					}
					for k, at := range before {
						if changed := !after[k].Equal(at); changed != (k == "prod-eu-1/base") {
							return fmt.Errorf("%s applied at %s, before %s: only base on prod-eu-1 should have been applied again", k, after[k], at)
						}
					}
					before = after
					return nil
				},
			},
			{
				// prod-us-1 loses its zone while the modules change: the plan is refused, naming the
				// cluster, the module and the variable, and nothing is applied anywhere.
				PreConfig:   func() { setClusterLabel(t, f, "prod-us-1", zoneKey, "") },
				Config:      acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, values, valuesModules(name, "v2")...),
				ExpectError: regexp.MustCompile(`(?s)Missing Variable.*prod-us-1: module base: variable zone not set`),
			},
			{
				// Nothing was applied: every record and object as before. With the label back, the
				// configuration as applied plans nothing.
				PreConfig: func() {
					after, err := appliedAt(f, name, "prod-eu-1", "prod-us-1")
					if err != nil {
						t.Fatal(err)
					}
					if !maps.EqualFunc(after, before, time.Time.Equal) {
						t.Fatalf("records changed by a refused plan: %v, before %v", after, before)
					}
					for _, c := range []string{"prod-eu-1", "prod-us-1"} {
						wc, err := f.WorkloadClient(c)
						if err != nil {
							t.Fatal(err)
						}
						var app corev1.ConfigMap
						if err := wc.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "app"}, &app); err != nil || app.Data["note"] != "v1" {
							t.Fatalf("%s: app %v (%v), want note v1 still: the refused plan must apply nothing", c, app.Data, err)
						}
					}
					setClusterLabel(t, f, "prod-us-1", zoneKey, "us-a")
				},
				Config:   config,
				PlanOnly: true,
			},
		},
	})
}
