package moduleassignment_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// The attributes a module assignment shares with rollouts, on both CLIs: `names` picks the
// clusters; `canary` goes first (the plan says so in `waves`, and refuses a canary that cannot);
// a field another server-side applier owns fails the cluster unless `force_conflicts`; with
// `on_failure = "rollback"` that failure restores the canary, which had succeeded; a cluster
// removed from `names` is listed leaving by the next plan and let go of.
func TestAccModuleAssignment_changeAttributes(t *testing.T) {
	acctest.OnOneLane(t, 0) // what each attribute does to the fleet, not how a CLI drives the provider
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("change")
	const canary, other = "prod-us-1", "prod-eu-1"
	config := func(version, extra string, names ...string) string {
		manifests := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\n"+
			"metadata:\n  name: settings\n  namespace: %[1]s\ndata:\n  setting: %[2]q\n", name, version)
		if version == "v2" {
			manifests += "  extra: ours\n" // v2 adds a field, which another applier takes first on one cluster
		}
		return acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_module_assignment" "change" {
  name         = %q
  namespace    = %q
  names        = ["%s"]
  canary       = [%q]
  update_limit = "1"
  on_failure   = "rollback"
  verify       = { timeout = "60s" }
  modules = [{
    name      = "cfg"
    version   = %q
    manifests = <<-EOT
%s    EOT
  }]
  %s
}
`, name, f.Namespace, strings.Join(names, `", "`), canary, version, indent(manifests, "      "), extra)
	}
	const addr = "gradual_module_assignment.change"
	settings := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for cluster, setting := range want {
				if err := expectSetting(f, cluster, name, "settings", setting); err != nil {
					return err
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             settings(map[string]string{canary: "<none>", other: "<none>"}),
		Steps: []resource.TestStep{
			{
				Config: config("v1", "", other, canary),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(addr, tfjsonpath.New("waves").AtMapKey("cfg"),
					knownvalue.StringExact("2 waves: 1 canary wave of 1 cluster, then 1 wave of 1 cluster"))},
				Check: settings(map[string]string{canary: "v1", other: "v1"}),
			},
			{
				// A canary the assignment does not pick cannot go first: refused at plan time.
				Config:      strings.Replace(config("v2", "", other, canary), fmt.Sprintf("canary       = [%q]", canary), `canary = ["no-such-cluster"]`, 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Canary Not In The First Wave`),
			},
			{
				// Another applier owns .data.extra on the second cluster: the canary takes v2, the
				// second cluster fails on the conflict, and on_failure = "rollback" restores the canary.
				PreConfig: func() { applyAs(t, f, other, name, "platform-tool", map[string]any{"extra": "theirs"}) },
				Config:    config("v2", "", other, canary),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					wavesAre(addr, "cfg", "2 waves: 1 canary wave of 1 cluster, then 1 wave of 1 cluster"),
				}},
				ExpectError: regexp.MustCompile(`Module Assignment Failed`),
			},
			{
				// Rolled back: the canary is on v1 again. force_conflicts takes the field.
				PreConfig: func() {
					if err := settings(map[string]string{canary: "v1", other: "v1"})(nil); err != nil {
						t.Fatalf("after the failed apply with on_failure = rollback: %v", err)
					}
				},
				Config: config("v2", "force_conflicts = true", other, canary),
				Check: resource.ComposeAggregateTestCheckFunc(settings(map[string]string{canary: "v2", other: "v2"}),
					func(*terraform.State) error { return expectData(f, other, name, "extra", "ours") }),
			},
			{
				// Out of names. The plan changes the clusters picked, so this apply lets go of
				// nothing (as for a changed selector); the next plan lists the cluster leaving.
				Config:             config("v2", "force_conflicts = true", canary),
				Check:              settings(map[string]string{canary: "v2", other: "v2"}),
				ExpectNonEmptyPlan: true, // the plan after it lists the cluster leaving
			},
			{
				Config: config("v2", "force_conflicts = true", canary),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("leaving"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(other)})),
				}},
				Check: settings(map[string]string{canary: "v2", other: "<none>"}),
			},
		},
	})
}

// applyAs server-side applies data into the ConfigMap settings of namespace ns on cluster, as
// field manager manager (another tool that owns those fields from then on).
func applyAs(t *testing.T, f *testbed.Fleet, cluster, ns, manager string, data map[string]any) {
	t.Helper()
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": ns}, "data": data}}
	if err := c.Patch(context.Background(), cm, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

// expectData checks one key of the ConfigMap settings of namespace ns on cluster.
func expectData(f *testbed.Fleet, cluster, ns, key, want string) error {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return err
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", key); got != want {
		return fmt.Errorf("%s: ConfigMap %s/settings %s = %q, want %q", cluster, ns, key, got, want)
	}
	return nil
}
