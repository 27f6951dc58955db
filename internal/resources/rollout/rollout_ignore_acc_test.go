package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// ignoreConfig renders two rollouts of the same app to one cluster, in two namespaces: `test`
// leaves the Deployment's .spec.replicas to whoever scales it (ignore_fields), `plain` does not.
func ignoreConfig(f *testbed.Fleet, name, version, rules string) string {
	one := func(resName, ns, extra string) string {
		return fmt.Sprintf(`
resource "gradual_rollout" %q {
  name      = %q
  namespace = %q
  names     = ["staging-eu-1"]
  manifests = <<-EOT
%s  EOT
  verify = { timeout = "90s" }
  %s
}
`, resName, ns, f.Namespace, indent(app(ns, version, false, "")), extra)
	}
	return acctest.ProviderConfig(f) + one("test", name, rules) + one("plain", name+"-plain", "")
}

// An HPA-like field manager scales both Deployments: the rollout that ignores .spec.replicas
// sees no drift and keeps the scaled count through a new revision; the one that does not
// reports the field as drifted and takes it back.
func TestAccRollout_ignoreFields(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("ignore")
	rules := `ignore_fields = [{ kind = "Deployment", name = "web", paths = [".spec.replicas"] }]`
	replicas := func(ns string) (int32, error) {
		var d appsv1.Deployment
		if err := workloadClient(t, f, "staging-eu-1").Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return 0, err
		}
		if d.Spec.Replicas == nil {
			return 0, fmt.Errorf("deployment %s/web has no replicas", ns)
		}
		return *d.Spec.Replicas, nil
	}
	expectReplicas := func(want map[string]int32) func(*terraform.State) error {
		return func(*terraform.State) error {
			for ns, n := range want {
				got, err := replicas(ns)
				if err != nil {
					return err
				}
				if got != n {
					return fmt.Errorf("deployment %s/web has %d replicas, want %d", ns, got, n)
				}
			}
			return nil
		}
	}
	scale := func() {
		// kubectl scale: the scale subresource, field manager kubectl, as an HPA does it.
		acctest.Kubectl(t, f, "staging-eu-1", "scale", "deployment/web", "-n", name, "--replicas=3")
		acctest.Kubectl(t, f, "staging-eu-1", "scale", "deployment/web", "-n", name+"-plain", "--replicas=3")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Paths that do not parse are refused at plan time, before anything exists.
				Config:      ignoreConfig(f, name, "v1", `ignore_fields = [{ paths = ["spec.replicas"] }]`),
				ExpectError: regexp.MustCompile(`(?s)Invalid Field Path.*expected\s+'\.'`),
			},
			{
				Config:      ignoreConfig(f, name, "v1", `ignore_fields = [{ kind = "Deployment", paths = [".metadata.name"] }]`),
				ExpectError: regexp.MustCompile(`(?s)Invalid Field Path.*only\s+labels\s+and\s+annotations`),
			},
			{
				Config: ignoreConfig(f, name, "v1", rules),
				Check:  expectReplicas(map[string]int32{name: 2, name + "-plain": 2}), // created: the manifest's value
			},
			{
				// Only the rollout without the rule plans a repair, naming the field.
				PreConfig: scale,
				Config:    ignoreConfig(f, name, "v1", rules),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("gradual_rollout.plain", plancheck.ResourceActionUpdate),
					attentionOf{address: "gradual_rollout.plain", cluster: "staging-eu-1", want: []string{"drifted", "Deployment", "/web", ".spec.replicas"}},
				}},
				Check: expectReplicas(map[string]int32{name: 3, name + "-plain": 2}),
			},
			{
				// A new revision is applied to the Deployment (its image changes) and still
				// leaves the scaled replicas alone; the plain rollout, scaled again, is set back.
				PreConfig: scale,
				Config:    ignoreConfig(f, name, "v2", rules),
				Check: resource.ComposeTestCheckFunc(
					expectReplicas(map[string]int32{name: 3, name + "-plain": 2}),
					func(*terraform.State) error {
						var d appsv1.Deployment
						if err := workloadClient(t, f, "staging-eu-1").Get(context.Background(), client.ObjectKey{Namespace: name, Name: "web"}, &d); err != nil {
							return err
						}
						if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v2") {
							return fmt.Errorf("deployment %s/web runs %s, want the v2 revision applied", name, img)
						}
						return nil
					},
				),
			},
			{
				// Nothing drifted from either point of view: an empty plan.
				Config:   ignoreConfig(f, name, "v2", rules),
				PlanOnly: true,
			},
			{
				// Changing the rules is a change (a new revision), though the manifests are the same.
				Config:             ignoreConfig(f, name, "v2", `ignore_fields = [{ kind = "Deployment", paths = [".spec.replicas", ".spec.paused"] }]`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// attentionOf checks, before the plan, the `attention` note of one cluster of the rollout at
// address.
type attentionOf struct {
	address, cluster string
	want             []string
}

func (a attentionOf) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != a.address || rc.Change == nil {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		attention, _ := before["attention"].(map[string]any)
		note, _ := attention[a.cluster].(string)
		for _, w := range a.want {
			if !strings.Contains(note, w) {
				resp.Error = fmt.Errorf("%s: attention for %s is %q, want it to contain %q", a.address, a.cluster, note, w)
				return
			}
		}
		return
	}
	resp.Error = fmt.Errorf("the plan has no change to %s", a.address)
}
