package moduleassignment_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// A module of 5 MiB that compresses poorly is applied, its management records are chunked, and
// `terraform import` restores the assignment from them.
func TestAccModuleAssignment_bigBundle(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("big")
	newLabeler(t, f, name, "staging-eu-1")
	big := module{name: "blob", version: "1.0.0", manifests: acctest.BigBundle(name, 5<<20)}
	config := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, "", big) + statusConfig(f, "test", name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 1})},
				Check: resource.ComposeAggregateTestCheckFunc(bindingCheck(res, "staging-eu-1", 0, "blob", "applied"), func(*terraform.State) error {
					return acctest.ExpectChunkedRecord(f, records.Key{Kind: "module-assignment", Namespace: f.Namespace, Name: name}, 4)
				}),
			},
			{
				ResourceName: res, ImportState: true, ImportStateId: f.Namespace + "/" + name,
				ImportStateVerify: true, ImportStateVerifyIdentifierAttribute: "id", ImportStateVerifyIgnore: []string{"timeouts", "waves"},
			},
			{Config: config, PlanOnly: true},
		},
	})
}
