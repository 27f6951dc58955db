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
// Each module revision is one artifact, its template, pinned on every cluster; each cluster's
// Kustomization substitutes that cluster's variables (postBuild.substitute), and what Flux applied
// in each workload cluster is read back: rendered by kustomize-controller as the provider
// renders it for the plan (an escaped `$${zone}` stays a literal). A label change on one cluster
// is values-changed for that cluster and module alone: the plan updates base there, and only
// that Kustomization changes (its variables; the digests stay). A cluster missing a variable
// refuses the plan, naming cluster, module and variable.
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
	// pins reads where each module's Kustomizations are pinned, and what they substitute, by
	// module then cluster.
	pins := func() (map[string]map[string]string, map[string]map[string]acctest.FluxKustomization, error) {
		digests, kss := map[string]map[string]string{}, map[string]map[string]acctest.FluxKustomization{}
		for _, m := range []string{"base", "app"} {
			p, err := acctest.FluxPinned(f, key(m), clusters)
			if err != nil {
				return nil, nil, err
			}
			k, err := acctest.FluxKustomizations(f, key(m), clusters)
			if err != nil {
				return nil, nil, err
			}
			digests[m], kss[m] = p, k
		}
		return digests, kss, nil
	}
	var first map[string]map[string]string
	var firstKs map[string]map[string]acctest.FluxKustomization
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
					if first, firstKs, err = pins(); err != nil {
						return err
					}
					for m, byCluster := range first {
						if byCluster["prod-eu-1"] == "" || byCluster["prod-eu-1"] != byCluster["prod-us-1"] || byCluster["prod-eu-1"] != byCluster["staging-eu-1"] {
							return fmt.Errorf("module %s pinned to %v: want one artifact (the template) on every cluster", m, byCluster)
						}
					}
					for c, want := range map[string]map[string]string{
						"prod-eu-1": {"cluster_name": "prod-eu-1", "zone": "eu-a"},
						"prod-us-1": {"cluster_name": "prod-us-1", "zone": "us-a", "tier": "premium"},
					} {
						got := firstKs["base"][c].Substitute
						for k, v := range want {
							if got[k] != v {
								return fmt.Errorf("%s: base's Kustomization substitutes %v, want %s=%s", c, got, k, v)
							}
						}
					}
					return nil
				},
			},
			{
				// prod-eu-1 moves zone: base renders differently there alone, and only that
				// cluster's Kustomization of base changes (its variables; every digest stays).
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
					now, nowKs, err := pins()
					if err != nil {
						return err
					}
					for m, byCluster := range now {
						for c, digest := range byCluster {
							if digest != first[m][c] {
								return fmt.Errorf("pinned %v after %v: want every digest kept (only values changed)", now, first)
							}
							if changed := nowKs[m][c].Generation != firstKs[m][c].Generation; changed != (m == "base" && c == "prod-eu-1") {
								return fmt.Errorf("%s on %s: Kustomization generation %d, was %d: want base on prod-eu-1 alone changed",
									m, c, nowKs[m][c].Generation, firstKs[m][c].Generation)
							}
						}
					}
					if z := nowKs["base"]["prod-eu-1"].Substitute["zone"]; z != "eu-c" {
						return fmt.Errorf("base on prod-eu-1 substitutes zone=%q, want eu-c", z)
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
