package rollout_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccRollout_fluxValues: one bundle with per-cluster values delivered through Flux. The
// revision is one artifact, its template, and one OCIRepository that the three clusters'
// Kustomizations share; each Kustomization substitutes its cluster's variables
// (postBuild.substitute), and what kustomize-controller rendered is read back in each workload
// cluster. A label change on one cluster plans an update of that cluster alone, and only its
// Kustomization changes (the digest stays); the provider waits for kustomize-controller to
// reconcile that change before it calls the cluster verified. A cluster missing a variable
// refuses the plan. It also shows Flux's view in the plan: the shared OCIRepository deleted by
// hand is drift on every cluster that names it, pinned again by the next apply.
func TestAccRollout_fluxValues(t *testing.T) {
	f := acctest.FluxFleet(t)
	acctest.OnOneLane(t, 0) // what each cluster is given, not how a CLI drives the provider
	name := acctest.UniqueLabel("fluxvalues")
	key := "values.gradual.dev/" + name
	rkey := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	t.Cleanup(func() {
		for _, c := range clusters {
			setClusterLabel(t, f, c, key, "")
		}
	})
	for c, zone := range map[string]string{"prod-eu-1": "eu-a", "prod-us-1": "us-a", "staging-eu-1": "eu-b"} {
		setClusterLabel(t, f, c, key, zone)
	}
	config := rolloutConfig(f, name, allThree, strings.ReplaceAll(valuesManifests(name), "${", "$${"), fmt.Sprintf(`update_limit = "3"
  values = {
    from_labels = { zone = %q }
    clusters    = { "prod-us-1" = { tier = "premium" } }
  }
  delivery = { flux = { repository = %q, insecure = true } }`, key, f.Flux.RegistryURL("gradual/"+name)))
	// pinned reads the digest each cluster's OCIRepository is pinned to.
	pinned := func() (map[string]string, error) { return acctest.FluxPinned(f, rkey, clusters) }
	var first map[string]string
	var firstKs map[string]acctest.FluxKustomization
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: resource.ComposeTestCheckFunc(expectValueSettings(f, name, map[string][2]string{
					"prod-eu-1": {"eu-a", "standard"}, "prod-us-1": {"us-a", "premium"}, "staging-eu-1": {"eu-b", "standard"},
				}), func(*terraform.State) error {
					var err error
					if first, err = pinned(); err != nil {
						return err
					}
					if first["prod-eu-1"] == "" || first["prod-eu-1"] != first["prod-us-1"] || first["prod-eu-1"] != first["staging-eu-1"] {
						return fmt.Errorf("pinned digests %v: want one artifact (the template) on every cluster", first)
					}
					if sources, err := acctest.FluxSources(ctx, mc, f.Namespace, rkey); err != nil || len(sources) != 1 {
						return fmt.Errorf("the rollout's OCIRepositories: %v (%v), want one, shared", sources, err)
					}
					if firstKs, err = acctest.FluxKustomizations(f, rkey, clusters); err != nil {
						return err
					}
					for c, want := range map[string]map[string]string{
						"prod-eu-1": {"cluster_name": "prod-eu-1", "zone": "eu-a"},
						"prod-us-1": {"cluster_name": "prod-us-1", "zone": "us-a", "tier": "premium"},
					} {
						for k, v := range want {
							if got := firstKs[c].Substitute; got[k] != v {
								return fmt.Errorf("%s: its Kustomization substitutes %v, want %s=%s", c, got, k, v)
							}
						}
					}
					return nil
				}),
			},
			{
				// prod-eu-1 moves zone: the plan updates it alone, and only its Kustomization changes.
				PreConfig: func() { setClusterLabel(t, f, "prod-eu-1", key, "eu-c") },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					attentionOnly{clusters: []string{"prod-eu-1"}},
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				Check: resource.ComposeTestCheckFunc(
					expectValueSettings(f, name, map[string][2]string{"prod-eu-1": {"eu-c", "standard"}, "prod-us-1": {"us-a", "premium"}}),
					func(*terraform.State) error {
						now, err := pinned()
						if err != nil {
							return err
						}
						if !maps.Equal(now, first) {
							return fmt.Errorf("pinned digests %v after %v: want every digest kept (only values changed)", now, first)
						}
						ks, err := acctest.FluxKustomizations(f, rkey, clusters)
						if err != nil {
							return err
						}
						for _, c := range clusters {
							if changed := ks[c].Generation != firstKs[c].Generation; changed != (c == "prod-eu-1") {
								return fmt.Errorf("%s: Kustomization generation %d, was %d: want prod-eu-1's alone changed", c, ks[c].Generation, firstKs[c].Generation)
							}
						}
						if z := ks["prod-eu-1"].Substitute["zone"]; z != "eu-c" {
							return fmt.Errorf("prod-eu-1 substitutes zone=%q, want eu-c", z)
						}
						return nil
					},
				),
			},
			{
				// Flux's view: the OCIRepository the three clusters share deleted by hand. The
				// refresh finds every cluster that names it drifted, saying why, and the plan pins
				// them again. (A Kustomization deleted by hand is found the same way, but Flux
				// prunes its objects first, and a Namespace takes a minute to go on this bed.)
				PreConfig: func() {
					repo, err := acctest.FluxSource(ctx, mc, f.Namespace, rkey, "prod-us-1")
					if err != nil {
						t.Fatal(err)
					}
					if err := mc.Delete(ctx, repo); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					attentionBefore{cluster: "prod-us-1", want: []string{"drifted: ", "Flux: its OCIRepository is gone"}},
					attentionOnly{clusters: clusters},
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 3 clusters")),
				}},
				Check: resource.ComposeTestCheckFunc(
					expectValueSettings(f, name, map[string][2]string{"prod-eu-1": {"eu-c", "standard"}, "prod-us-1": {"us-a", "premium"}, "staging-eu-1": {"eu-b", "standard"}}),
					func(*terraform.State) error {
						if sources, err := acctest.FluxSources(ctx, mc, f.Namespace, rkey); err != nil || len(sources) != 1 {
							return fmt.Errorf("the rollout's OCIRepositories after the repair: %v (%v), want one, shared", sources, err)
						}
						return nil
					},
				),
			},
			{
				PreConfig:   func() { setClusterLabel(t, f, "staging-eu-1", key, "") },
				Config:      config,
				ExpectError: regexp.MustCompile(`(?s)Missing Variable.*staging-eu-1: variable zone not set`),
			},
			{
				// Labelled again, so that destroy plans.
				PreConfig: func() { setClusterLabel(t, f, "staging-eu-1", key, "eu-b") },
				Config:    config,
			},
		},
	})
}
