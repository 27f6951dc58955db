package moduleassignment_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// A Reconcile assignment with ignore_fields leaves a scaled Deployment's replicas alone (no drift,
// kept through a new module version); without the rule it takes them back.
func TestAccModuleAssignment_ignoreFields(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("ignore")
	newLabeler(t, f, name, "staging-eu-1")
	rule := `ignore_fields = [{ kind = "Deployment", paths = [".spec.replicas"] }]`
	cfg := func(version, extra string) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, extra, module{name: "web", version: version, manifests: deployment(name, "web", version, false)})
	}
	expect := func(replicas int32, image string) func(*terraform.State) error {
		return func(*terraform.State) error {
			c, err := f.WorkloadClient("staging-eu-1")
			if err != nil {
				return err
			}
			var d appsv1.Deployment
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "web"}, &d); err != nil {
				return err
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas || !strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+image) {
				return fmt.Errorf("deployment %s/web: replicas %v, image %s; want %d, %s", name, d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, replicas, image)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: cfg("v1", rule), Check: expect(1, "v1")},
			{
				PreConfig: func() {
					acctest.Kubectl(t, f, "staging-eu-1", "scale", "deployment/web", "-n", name, "--replicas=3")
				},
				Config: cfg("v1", rule),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionNoop),
				}},
				Check: expect(3, "v1"),
			},
			{Config: cfg("v2", rule), Check: expect(3, "v2")},
			{
				// Without the rule the module is another revision, and its replicas are taken back.
				Config: cfg("v2", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
				}},
				Check: expect(1, "v2"),
			},
		},
	})
}
