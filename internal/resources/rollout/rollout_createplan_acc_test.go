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
