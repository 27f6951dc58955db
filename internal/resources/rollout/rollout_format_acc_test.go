package rollout_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// formatted is a Namespace and a ConfigMap, written one way or another: same objects, other
// key order, flow style, quoting, a comment and the documents swapped.
func formatted(ns, setting string, other bool) string {
	if !other {
		return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\ndata:\n  setting: %[2]q\n", ns, setting)
	}
	return fmt.Sprintf("# reformatted\nkind: ConfigMap\napiVersion: v1\ndata: {setting: '%[2]s'}\nmetadata: {namespace: %[1]s, name: settings}\n---\nmetadata:\n    name: %[1]s\nkind: Namespace\napiVersion: v1\n", ns, setting)
}

// A formatting-only edit of `manifests` (same revision) plans nothing for either resource, while
// an edit of a value still plans an update.
func TestAccRollout_formattingOnlyEditPlansNothing(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("format")
	rolloutNS, assignmentNS := name, name+"-m"
	// A rollout and a module assignment on one cluster. The assignment's objects live in a
	// namespace of their own so the two resources never claim the same object.
	config := func(other bool, setting string) string {
		return rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, formatted(rolloutNS, setting, other), "") + fmt.Sprintf(`
resource "gradual_module_assignment" "test" {
  name      = %[1]q
  namespace = %[2]q
  selector  = { match_labels = { env = "staging" } }
  verify    = { timeout = "60s" }
  modules = [{
    name      = "settings"
    version   = "1"
    manifests = <<-EOT
%[3]s    EOT
  }]
}
`, name, f.Namespace, indent(formatted(assignmentNS, setting, other)))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(false, "v1")},
			{
				Config: config(true, "v1"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				// A changed value: the plan shows the changed object under `objects` (the unchanged
				// Namespace stays as it was), while `manifests` is kept out of the CLI's output.
				Config: config(true, "v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectSensitiveValue("gradual_rollout.test", tfjsonpath.New("manifests")),
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("objects"), knownvalue.MapExact(map[string]knownvalue.Check{
						"/Namespace /" + rolloutNS:              knownvalue.StringExact(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + rolloutNS + `"}}`),
						"/ConfigMap " + rolloutNS + "/settings": knownvalue.StringRegexp(regexp.MustCompile(`"setting":"v2"`)),
					})),
					plancheck.ExpectSensitiveValue("gradual_module_assignment.test", tfjsonpath.New("modules").AtSliceIndex(0).AtMapKey("manifests")),
					plancheck.ExpectKnownValue("gradual_module_assignment.test", tfjsonpath.New("objects").AtMapKey("settings").AtMapKey("/ConfigMap "+assignmentNS+"/settings"),
						knownvalue.StringRegexp(regexp.MustCompile(`"setting":"v2"`))),
				}},
			},
		},
	})
}
