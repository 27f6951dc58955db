package rollout_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// The contract of a create, and why it is not an update's: both CLIs plan a create again when
// they apply it (the "final plan"), with no prior state and no private state, and reject any
// value the plan showed known that comes out different. A create's waves can only be planned
// again from a fresh read of the fleet, so a `waves` known at plan would make any change of the
// fleet between `plan -out` and `apply` (here a Cluster labelled to match) an "inconsistent final
// plan": tried, it fails exactly so on Terraform and OpenTofu. So `waves` stays unknown at plan
// (the `Planned Waves` warning shows the waves as the fleet reads then), the apply rolls out to
// the clusters picked when it runs, the joiner included, and `waves` says what it did. This test
// fails if a create's `waves` is made known at plan without a plan-to-final-plan channel.
func TestAccRollout_createSavedPlanJoinerIsRolledOutTo(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("cjoin")
	relabel := labeller(t, f, name)
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	relabel("prod-eu-1", true)
	relabel("prod-us-1", true)
	t.Cleanup(func() {
		for _, c := range clusters {
			relabel(c, false)
		}
	})
	targets := fmt.Sprintf(`selector = { match_labels = { %q = "yes" } }`, name)
	config := rolloutConfig(f, name, targets, app(name, "v1", false, ""), `update_limit = "1"`)
	const res = "gradual_rollout.test"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, clusters, name) },
		Steps: []resource.TestStep{
			{
				// plan -out picks two clusters; staging-eu-1 joins before the saved plan is applied.
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("waves")),
					sideEffect(func() { relabel("staging-eu-1", true) }),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.StringExact("3 waves of 1 cluster")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("summary"), knownvalue.MapExact(map[string]knownvalue.Check{
						"current": knownvalue.Int64Exact(3),
					})),
				},
				Check: func(*terraform.State) error { return expectDeployment(f, clusters, name, "v1", false) },
			},
			// Nothing left for the next plan: the joiner runs the revision already.
			{Config: config, PlanOnly: true},
		},
	})
}

// What a reviewer of a create can do to have a saved plan keep to the clusters it was made
// with: pick them through a `gradual_clusters` data source (every Cluster its selector picks,
// not only the eligible ones, so that a cluster going not ready is skipped, not let go of). Both
// CLIs read a data source at plan and keep what it read in the saved plan, so the rollout's
// `names` is the plan's at apply: a Cluster labelled to match after `plan -out` is not rolled out
// to. The next plan reads it (a change of `names`), and its apply takes it.
func TestAccRollout_createSavedPlanPinnedNamesLeavesJoiner(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("cpin")
	relabel := labeller(t, f, name)
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	relabel("prod-eu-1", true)
	relabel("prod-us-1", true)
	t.Cleanup(func() {
		for _, c := range clusters {
			relabel(c, false)
		}
	})
	picked := fmt.Sprintf(`
data "gradual_clusters" "picked" {
  namespace = %q
  selector  = { match_labels = { %q = "yes" } }
}
`, f.Namespace, name)
	config := picked + rolloutConfig(f, name, `names = [for c in data.gradual_clusters.picked.clusters : c.name]`, app(name, "v1", false, ""), `update_limit = "1"`)
	const res = "gradual_rollout.test"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, clusters, name) },
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("prod-eu-1"), knownvalue.StringExact("prod-us-1"),
					})),
					sideEffect(func() { relabel("staging-eu-1", true) }),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.StringExact("2 waves of 1 cluster")),
				},
				// The refresh after apply reads staging-eu-1 into the data source.
				ExpectNonEmptyPlan: true,
				Check: func(*terraform.State) error {
					if err := expectGone(f, []string{"staging-eu-1"}, name); err != nil {
						return fmt.Errorf("a cluster that joined after the saved plan was rolled out to: %w", err)
					}
					return expectDeployment(f, clusters[:2], name, "v1", false)
				},
			},
			{
				// The next plan shows it joining; its apply rolls out to it.
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("prod-eu-1"), knownvalue.StringExact("prod-us-1"), knownvalue.StringExact("staging-eu-1"),
					})),
				}},
				Check: func(*terraform.State) error { return expectDeployment(f, clusters, name, "v1", false) },
			},
		},
	})
}
