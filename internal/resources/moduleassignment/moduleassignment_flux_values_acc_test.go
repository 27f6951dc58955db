package moduleassignment_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccModuleAssignment_fluxValues: two modules with per-cluster values delivered through Flux.
// Each module's rendering for a cluster is an artifact of its own, and clusters rendered alike
// share one: base (which takes the cluster's name) pins three digests on three clusters, app
// (which takes only a tier) two, prod-eu-1 and staging-eu-1 sharing theirs. What Flux applied in
// each workload cluster is read back. A label change on one cluster is values-changed for that
// cluster and module alone: the plan updates base there, only that OCIRepository is re-pinned.
// A cluster missing a variable refuses the plan, naming cluster, module and variable.
func TestAccModuleAssignment_fluxValues(t *testing.T) {
	f := acctest.FluxFleet(t)
	acctest.OnOneLane(t, 0) // what each cluster is given, not how a CLI drives the provider
	name := acctest.UniqueLabel("fluxmv")
	zoneKey := "values.gradual.dev/" + name
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	newLabeler(t, f, name, clusters...)
	t.Cleanup(func() {
		for _, c := range clusters {
			setClusterLabel(t, f, c, zoneKey, "")
		}
	})
	for c, zone := range map[string]string{"prod-eu-1": "eu-a", "prod-us-1": "us-a", "staging-eu-1": "eu-b"} {
		setClusterLabel(t, f, c, zoneKey, zone)
	}
	config := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, fmt.Sprintf(`update_limit = "3"
  values = {
    from_labels = { zone = %q }
    clusters    = { "prod-us-1" = { tier = "premium" } }
  }
  delivery = { flux = { repository = %q, insecure = true } }`, zoneKey, f.Flux.RegistryURL("gradual/"+name)), valuesModules(name, "v1")...)
	key := func(module string) records.Key {
		return records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + "." + module}
	}
	// pins reads where each module's OCIRepositories are pinned, by module then cluster.
	pins := func() (map[string]map[string]string, error) {
		out := map[string]map[string]string{}
		for _, m := range []string{"base", "app"} {
			p, err := acctest.FluxPinned(f, key(m), clusters)
			if err != nil {
				return nil, err
			}
			out[m] = p
		}
		return out, nil
	}
	var first map[string]map[string]string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, c := range clusters {
				if err := expectSetting(f, c, name, "zone", "<none>"); err != nil {
					return fmt.Errorf("after destroy, want it pruned by Flux: %w", err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 3}), noAttention(res)},
				Check: func(*terraform.State) (err error) {
					if err := expectRendered(f, name, map[string][2]string{
						"prod-eu-1": {"eu-a", "standard"}, "prod-us-1": {"us-a", "premium"}, "staging-eu-1": {"eu-b", "standard"},
					}); err != nil {
						return err
					}
					if first, err = pins(); err != nil {
						return err
					}
					base, app := first["base"], first["app"]
					if base["prod-eu-1"] == base["prod-us-1"] || base["prod-eu-1"] == base["staging-eu-1"] || base["prod-us-1"] == base["staging-eu-1"] {
						return fmt.Errorf("module base pinned to %v: three renderings, want three artifacts", base)
					}
					if app["prod-eu-1"] != app["staging-eu-1"] || app["prod-eu-1"] == app["prod-us-1"] {
						return fmt.Errorf("module app pinned to %v: want prod-eu-1 and staging-eu-1 (rendered alike) on one artifact, prod-us-1 on another", app)
					}
					return nil
				},
			},
			{
				// prod-eu-1 moves zone: base renders differently there alone, and only that
				// cluster's OCIRepository of base is re-pinned.
				PreConfig: func() { setClusterLabel(t, f, "prod-eu-1", zoneKey, "eu-c") },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					attentionBefore{res: res, cluster: "prod-eu-1", want: []string{"values-changed: ", "module base renders differently", "ConfigMap " + name + "/zone"}},
					attentionOnly{res: res, clusters: []string{"prod-eu-1"}},
					plancheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.MapExact(map[string]knownvalue.Check{
						"base": knownvalue.StringExact("1 wave of 1 cluster"),
					})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 3}), noAttention(res)},
				Check: func(*terraform.State) error {
					if err := expectRendered(f, name, map[string][2]string{
						"prod-eu-1": {"eu-c", "standard"}, "prod-us-1": {"us-a", "premium"}, "staging-eu-1": {"eu-b", "standard"},
					}); err != nil {
						return err
					}
					now, err := pins()
					if err != nil {
						return err
					}
					for m, byCluster := range now {
						for c, digest := range byCluster {
							if moved := digest != first[m][c]; moved != (m == "base" && c == "prod-eu-1") {
								return fmt.Errorf("pinned %v after %v: want base on prod-eu-1 alone re-pinned", now, first)
							}
						}
					}
					return nil
				},
			},
			{
				PreConfig:   func() { setClusterLabel(t, f, "staging-eu-1", zoneKey, "") },
				Config:      config,
				ExpectError: regexp.MustCompile(`(?s)Missing Variable.*staging-eu-1: module base: variable zone not set`),
			},
			{
				// Labelled again: nothing to do (the refused plan changed nothing), and destroy plans.
				PreConfig: func() { setClusterLabel(t, f, "staging-eu-1", zoneKey, "eu-b") },
				Config:    config,
				PlanOnly:  true,
			},
		},
	})
}
