package moduleassignment_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
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
