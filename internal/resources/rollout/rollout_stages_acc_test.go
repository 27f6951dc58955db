package rollout_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// onRevision checks that cluster's records say it runs revision ("" = nothing applied).
func onRevision(t *testing.T, f *testbed.Fleet, name, cluster, revision string) func(*terraform.State) error {
	return func(*terraform.State) error {
		got := ""
		if cur := workloadRecords(t, f, cluster, name).Current; cur != nil {
			got = cur.Revision
		}
		if got != revision {
			return fmt.Errorf("%s runs %q, want %q", cluster, got, revision)
		}
		return nil
	}
}

// Stages with reviewed promotion: promote_until the first stage stops there and `waves` says who
// waits; the one-line promotion carries the revision on; a revision that fails in the first
// stage beyond its own max_failures stops the apply before the next stage (although the
// rollout's budget would tolerate it), and the next plan refuses it.
func TestAccRollout_stages(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the stages do to the fleet, not how a CLI drives the provider
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("stages")
	config := func(setting string, broken bool, until string) string {
		return rolloutConfig(f, name, allThree, app(name, setting, broken, ""), fmt.Sprintf(`max_failures = "2"
  promote_until = %q
  stages = [
    { name = "eu", names = ["prod-eu-1", "staging-eu-1"], update_limit = "2", max_failures = "0", bake_time = "0s" },
    { name = "us", names = ["prod-us-1"] },
  ]`, until))
	}
	v1 := revisionOf(t, app(name, "v1", false, ""))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("v1", false, "eu"),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("gradual_rollout.test", "waves", "1 wave of 2 clusters; stops after stage eu: 1 cluster waits for stage us"),
					// The cluster that waits is counted, not listed as needing attention.
					resource.TestCheckResourceAttr("gradual_rollout.test", "summary.waiting", "1"),
					resource.TestCheckResourceAttr("gradual_rollout.test", "summary.current", "2"),
					resource.TestCheckNoResourceAttr("gradual_rollout.test", "attention.prod-us-1"),
					onRevision(t, f, name, "prod-eu-1", v1), onRevision(t, f, name, "staging-eu-1", v1), onRevision(t, f, name, "prod-us-1", ""),
				),
			},
			{
				// The promotion is one line, and the plan says what it does.
				Config: config("v1", false, "us"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				Check: onRevision(t, f, name, "prod-us-1", v1),
			},
			{
				// v2 reaches the first stage only: its clusters fail it, beyond the stage's
				// max_failures 0 (within the rollout's 2), so us never starts and eu is restored.
				Config:      config("v2", true, "us"),
				ExpectError: regexp.MustCompile(`stage eu: 2 failures, more than its\s+max_failures 0`),
			},
			{
				Config:      config("v2", true, "us"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Revision Recorded Invalid`),
			},
			{
				// Nothing of v2 reached the second stage; the first is back on v1.
				Config: config("v1", false, "us"),
				Check: resource.ComposeTestCheckFunc(
					onRevision(t, f, name, "prod-us-1", v1), onRevision(t, f, name, "prod-eu-1", v1), onRevision(t, f, name, "staging-eu-1", v1),
				),
			},
		},
	})
}
