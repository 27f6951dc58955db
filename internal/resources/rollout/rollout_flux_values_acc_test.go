package rollout_test

import (
	"context"
	"fmt"
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

// TestAccRollout_fluxValues: one bundle with per-cluster values delivered through Flux. Each
// cluster's rendering is an artifact of its own: three clusters get three renderings (the
// OCIRepositories pin three digests); a label change on one cluster plans an update of that
// cluster alone, and only its OCIRepository is re-pinned; a cluster missing a variable refuses
// the plan. It also shows Flux's view in the plan: an OCIRepository deleted by hand is drift,
// pinned again by the next apply.
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
					if first["prod-eu-1"] == first["prod-us-1"] || first["prod-eu-1"] == first["staging-eu-1"] || first["prod-us-1"] == first["staging-eu-1"] {
						return fmt.Errorf("pinned digests %v: three renderings, want three artifacts", first)
					}
					// One OCIRepository per artifact: three renderings share none.
					sources := map[string]string{}
					for _, c := range clusters {
						src, err := acctest.FluxSource(ctx, mc, f.Namespace, rkey, c)
						if err != nil {
							return err
						}
						if other, ok := sources[src.GetName()]; ok {
							return fmt.Errorf("%s and %s name one OCIRepository %s: want one each", other, c, src.GetName())
						}
						sources[src.GetName()] = c
					}
					return nil
				}),
			},
			{
				// prod-eu-1 moves zone: the plan updates it alone, and only its OCIRepository moves.
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
						if now["prod-eu-1"] == first["prod-eu-1"] || now["prod-us-1"] != first["prod-us-1"] || now["staging-eu-1"] != first["staging-eu-1"] {
							return fmt.Errorf("pinned digests %v after %v: want prod-eu-1 alone re-pinned", now, first)
						}
						return nil
					},
				),
			},
			{
				// Flux's view: prod-us-1's OCIRepository (the one its Kustomization names: its
				// rendering is its own, no other cluster's) deleted by hand. The refresh finds the
				// cluster drifted, saying why, and the plan pins it again, alone. (A Kustomization
				// deleted by hand is found the same way, but Flux prunes its objects first, and a
				// Namespace takes a minute to go on this bed.)
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
					attentionOnly{clusters: []string{"prod-us-1"}},
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				Check: expectValueSettings(f, name, map[string][2]string{"prod-us-1": {"us-a", "premium"}}),
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
