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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// A module as `helm template` gives it: namespaced objects without metadata.namespace. With the
// module's default_namespace the ConfigMap lands in it, the ClusterRole stays cluster-scoped, and
// the module's revision is that of the same objects written with their namespace — in the plan,
// the state, and the status data source (which reads the configuration back from the record, as
// import does). A default_namespace not known at plan leaves the revision known after apply.
func TestAccModuleAssignment_defaultNamespace(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("defns")
	newLabeler(t, f, name, "staging-eu-1")
	clusterRole := fmt.Sprintf("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s-reader\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get]\n", name)
	written := configMaps(name, "v1", "settings") + clusterRole
	rendered := strings.ReplaceAll(written, "  namespace: "+name+"\n", "")
	if strings.Contains(rendered, "namespace: ") || rendered == written {
		t.Fatalf("the rendered module still names a namespace:\n%s", rendered)
	}
	want, err := manifest.Revision(written)
	if err != nil {
		t.Fatal(err)
	}
	withDefault := module{name: "cfg", version: "1", manifests: rendered, defaultNamespace: name}
	asWritten := module{name: "cfg", version: "1", manifests: written}
	cfg := func(m module) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, "", m) + statusConfig(f, "test", name)
	}
	revisionIs := statecheck.ExpectKnownValue(res, tfjsonpath.New("revisions"), knownvalue.MapExact(map[string]knownvalue.Check{"cfg": knownvalue.StringExact(want)}))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if err := expectSetting(f, "staging-eu-1", name, "settings", "<none>"); err != nil {
				return err
			}
			if err := clusterRoleExists(f, "staging-eu-1", name+"-reader"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the ClusterRole should be deleted with the assignment: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(withDefault),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// Known at plan, on create already: the content hash of the objects as applied.
					plancheck.ExpectKnownValue(res, tfjsonpath.New("revisions"), knownvalue.MapExact(map[string]knownvalue.Check{"cfg": knownvalue.StringExact(want)})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					revisionIs, summaryIs(res, map[string]int64{"current": 1}), noAttention(res),
					statecheck.ExpectKnownValue("data.gradual_module_assignment_status.test", tfjsonpath.New("revisions"),
						knownvalue.MapExact(map[string]knownvalue.Check{"cfg": knownvalue.StringExact(want)})),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					bindingCheck(res, "staging-eu-1", 0, "cfg", "applied"),
					resource.TestCheckResourceAttr("data.gradual_module_assignment_status.test", "clusters.0.bindings.0.revision", want),
					func(*terraform.State) error {
						if err := expectSetting(f, "staging-eu-1", name, "settings", "v1"); err != nil {
							return fmt.Errorf("the ConfigMap is not in %s: %w", name, err)
						}
						if err := clusterRoleExists(f, "staging-eu-1", name+"-reader"); err != nil {
							return fmt.Errorf("the ClusterRole %s-reader (cluster-scoped): %w", name, err)
						}
						return nil
					}),
			},
			{
				// The next plan is empty: the applied objects are the planned ones, not drift.
				Config: cfg(withDefault),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				// The record keeps default_namespace: an import restores the module as configured.
				ResourceName: res, ImportState: true, ImportStateId: f.Namespace + "/" + name,
				ImportStateVerify: true, ImportStateVerifyIdentifierAttribute: "id", ImportStateVerifyIgnore: []string{"timeouts", "waves"},
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 || states[0].Attributes["modules.0.default_namespace"] != name {
						return fmt.Errorf("imported modules.0.default_namespace: %v", states)
					}
					return nil
				},
			},
			{
				// The same objects written with their namespace are the same revision: the plan
				// changes the configuration only, and the cluster stays current on it.
				Config: cfg(asWritten),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("revisions"), knownvalue.MapExact(map[string]knownvalue.Check{"cfg": knownvalue.StringExact(want)})),
					// No cluster to change: the objects are the ones it has.
					plancheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{revisionIs, summaryIs(res, map[string]int64{"current": 1}), noAttention(res)},
				Check:             func(*terraform.State) error { return expectSetting(f, "staging-eu-1", name, "settings", "v1") },
			},
			{
				// default_namespace not known at plan (terraform_data's output is known after it is
				// created): the revision is known after apply, with no error, and comes out as the
				// written form's, so nothing changes on the cluster.
				Config: `resource "terraform_data" "ns" { input = "` + name + `" }` + "\n" +
					strings.Replace(cfg(withDefault), fmt.Sprintf("default_namespace = %q", name), "default_namespace = terraform_data.ns.output", 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("revisions")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					revisionIs, summaryIs(res, map[string]int64{"current": 1}), noAttention(res),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("modules").AtSliceIndex(0).AtMapKey("default_namespace"), knownvalue.StringExact(name)),
				},
				Check: func(*terraform.State) error { return expectSetting(f, "staging-eu-1", name, "settings", "v1") },
			},
			{
				// Without default_namespace, rendered objects cannot be applied: the plan's check
				// names them, before anything changes.
				Config:      cfg(module{name: "cfg", version: "2", manifests: rendered}),
				ExpectError: regexp.MustCompile(`(?s)namespaced\s+kind\s+without\s+metadata\.namespace`),
			},
		},
	})
}

// clusterRoleExists reads the ClusterRole name in cluster: nil when it is there.
func clusterRoleExists(f *testbed.Fleet, cluster, name string) error {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return err
	}
	return c.Get(context.Background(), client.ObjectKey{Name: name}, &rbacv1.ClusterRole{})
}
