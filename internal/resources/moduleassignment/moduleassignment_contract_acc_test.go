package moduleassignment_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// betweenPlanAndApply is a plan check that changes the fleet between `plan -out` and the apply
// of the saved plan (terraform-plugin-testing saves the plan when a step has PreApply checks).
type betweenPlanAndApply func()

func (b betweenPlanAndApply) CheckPlan(context.Context, plancheck.CheckPlanRequest, *plancheck.CheckPlanResponse) {
	b()
}

// The plan is the contract: a cluster that stops matching between a saved plan and its apply
// keeps its modules (the plan did not list it in `leaving`); the next plan lists it, and that
// apply lets go of it.
func TestAccModuleAssignment_savedPlanRelabelOutLeavesItAlone(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("masaved")
	l := newLabeler(t, f, name, "prod-eu-1", "staging-eu-1")
	v1 := module{name: "cfg", version: "1.0.0", manifests: configMaps(name, "v1", "settings")}
	v2 := module{name: "cfg", version: "2.0.0", manifests: configMaps(name, "v2", "settings")}
	config := func(m module) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, "", m)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(v1)},
			{
				Config: config(v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(res, tfjsonpath.New("leaving"), knownvalue.ListSizeExact(0)),
					betweenPlanAndApply(func() { l.set("staging-eu-1", false) }),
				}},
				ExpectNonEmptyPlan: true, // the refresh after apply finds staging-eu-1 leaving
				Check: func(*terraform.State) error {
					if err := expectSetting(f, "staging-eu-1", name, "settings", "v1"); err != nil {
						return err // a cluster no plan showed leaving lost its module
					}
					return expectSetting(f, "prod-eu-1", name, "settings", "v2")
				},
			},
			{
				Config: config(v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(res, tfjsonpath.New("leaving"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("staging-eu-1")})),
				}},
				Check: func(*terraform.State) error {
					return expectSetting(f, "staging-eu-1", name, "settings", "<none>")
				},
			},
		},
	})
}

// A create's saved plan applied after a Cluster joined the selector: no inconsistent final plan.
// Both CLIs plan a create again at apply with no prior and no private state, so its `waves` can
// only come from a fresh read of the fleet and stays unknown at plan (the `Planned Waves` warning
// shows the waves as the fleet reads then); apply takes the joiner too, and `waves` says so. The
// same on the rollout: TestAccRollout_createSavedPlanJoinerIsRolledOutTo.
func TestAccModuleAssignment_createSavedPlanJoinerGetsTheModules(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("macjoin")
	l := newLabeler(t, f, name, "prod-eu-1", "prod-us-1")
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1 := module{name: "cfg", version: "1.0.0", manifests: configMaps(name, "v1", "settings")}
	config := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, `update_limit = "1"`, v1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("waves")),
					betweenPlanAndApply(func() { l.set("staging-eu-1", true) }),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.MapExact(map[string]knownvalue.Check{
						"cfg": knownvalue.StringExact("3 waves of 1 cluster"),
					})),
				},
				Check: func(*terraform.State) error {
					for _, c := range clusters {
						if err := expectSetting(f, c, name, "settings", "v1"); err != nil {
							return err
						}
					}
					return nil
				},
			},
			// Nothing left for the next plan: the joiner has the module already.
			{Config: config, PlanOnly: true},
		},
	})
}
