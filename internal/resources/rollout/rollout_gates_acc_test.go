package rollout_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// gatedConfig is a rollout of app to staging-eu-1 alone with verify as given.
func gatedConfig(f *testbed.Fleet, name, manifests, verify string) string {
	return strings.Replace(rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, manifests, verify),
		"  verify = { timeout = \"90s\" }\n", "", 1)
}

// verify.health_checks: an expression that does not compile fails the plan naming it, before
// anything is applied; a Deployment that kstatus calls ready (kwok rolls it out) but whose
// `current` expression never holds fails the cluster at the verify timeout, naming the object
// and the expression; the cluster is restored and the revision recorded invalid.
func TestAccRollout_healthExpressions(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("cel")
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev2 := revisionOf(t, v2)
	verify := func(current string) string {
		return fmt.Sprintf(`verify = {
    timeout       = "8s"
    health_checks = [{
      api_version = "apps/v1"
      kind        = "Deployment"
      current     = %q
      failed      = "status.conditions.exists(e, e.type == 'Progressing' && e.status == 'False')"
    }]
  }`, current)
	}
	const ready = "status.conditions.filter(e, e.type == 'Available').all(e, e.status == 'True')"
	const neverSmokeTested = "status.conditions.exists(e, e.type == 'SmokeTested' && e.status == 'True')"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, []string{"staging-eu-1"}, name) },
		Steps: []resource.TestStep{
			{
				Config:      gatedConfig(f, name, v1, verify("status.conditions.exists(e, e.type == ")),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid CEL Expression.*verify.health_checks\[0\].current`),
			},
			{Config: gatedConfig(f, name, v1, verify(ready))},
			{
				Config:      gatedConfig(f, name, v2, verify(neverSmokeTested)),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*staging-eu-1.*` + name + `/web:\s+InProgress:\s+health\s+expression\s+current`),
			},
			{
				PreConfig: func() {
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
				},
				Config:      gatedConfig(f, name, v2, verify(neverSmokeTested)),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*staging-eu-1`),
			},
		},
	})
}
