package rollout_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// A 5 MiB bundle that compresses poorly rolls out, its management records (progress with the
// configuration, ledger) are chunked, and `terraform import` restores the resource from them.
func TestAccRollout_bigBundle(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("big")
	manifests := acctest.BigBundle(name, 5<<20)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, manifests, ""),
				Check: func(*terraform.State) error {
					return acctest.ExpectChunkedRecord(f, records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}, 4)
				},
			},
			{
				ResourceName:                         "gradual_rollout.test",
				ImportState:                          true,
				ImportStateId:                        f.Namespace + "/" + name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				ImportStateVerifyIgnore:              []string{"timeouts", "waves"},
			},
			{Config: rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, manifests, ""), PlanOnly: true},
		},
	})
}
