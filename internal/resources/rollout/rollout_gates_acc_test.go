package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// verify.cluster_gates: a Node of the cluster going NotReady while the new revision bakes fails
// that cluster (it was healthy before the change), which is restored and the revision recorded
// invalid.
func TestAccRollout_nodeNotReadyGate(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("gate")
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev2 := revisionOf(t, v2)
	const verify = `verify = {
    timeout   = "30s"
    bake_time = "8s"
  }`
	c := workloadClient(t, f, "staging-eu-1")
	failed := make(chan string, 1) // the Node made NotReady
	watch, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(stop) // a watch still running when the test ends stops without a word
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: gatedConfig(f, name, v1, verify)},
			{
				// Once v2 is on the cluster (its wave started), a Node goes NotReady.
				PreConfig: func() {
					go func() {
						failed <- failNodeWhen(watch, t, c, func(ctx context.Context) bool { return deploymentImage(ctx, c, name) == "registry.example/web:v2" })
					}()
				},
				Config:      gatedConfig(f, name, v2, verify),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*staging-eu-1.*cluster\s+gate:\s+Node\s+kwok-node-\d+\s+Ready\s+is\s+False\s+\(GradualTest\)`),
			},
			{
				PreConfig: func() {
					if node := <-failed; node != "" {
						healNode(t, c, node)
					} else {
						t.Fatal("no Node was made NotReady: v2 never reached the cluster")
					}
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
				},
				Config:      gatedConfig(f, name, v2, verify),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*staging-eu-1`),
			},
		},
	})
}

// kwokNodeAnnotation makes kwok's controller keep a Node Ready (testbed.fakeNode).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

func deploymentImage(ctx context.Context, c client.Client, ns string) string {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// failNodeWhen waits (until ctx ends) for cond to hold, then takes the first Node of the cluster
// from kwok (without its annotation kwok no longer reports for it) and sets its Ready condition
// False. It returns the Node's name ("" when ctx ended first: the step that waits for it fails);
// healNode undoes it, and so does the test's cleanup.
func failNodeWhen(ctx context.Context, t *testing.T, c client.Client, cond func(context.Context) bool) string {
	for !cond(ctx) {
		if ctx.Err() != nil {
			return ""
		}
		time.Sleep(100 * time.Millisecond)
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Errorf("list Nodes: %v (%d)", err, len(nodes.Items))
		return ""
	}
	n := nodes.Items[0]
	t.Cleanup(func() { healNode(t, c, n.Name) })
	patch := client.MergeFrom(n.DeepCopy())
	delete(n.Annotations, kwokNodeAnnotation)
	if err := c.Patch(ctx, &n, patch); err != nil {
		t.Errorf("take Node %s from kwok: %v", n.Name, err)
		return n.Name
	}
	if err := setNodeReady(ctx, c, n.Name, corev1.ConditionFalse, "GradualTest"); err != nil {
		t.Errorf("Node %s NotReady: %v", n.Name, err)
	}
	return n.Name
}

// healNode gives the Node back to kwok and Ready, and waits until it is.
func healNode(t *testing.T, c client.Client, name string) {
	t.Helper()
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		t.Errorf("get Node %s: %v", name, err)
		return
	}
	if n.Annotations[kwokNodeAnnotation] != "fake" {
		patch := client.MergeFrom(n.DeepCopy())
		n.Annotations[kwokNodeAnnotation] = "fake"
		if err := c.Patch(ctx, &n, patch); err != nil {
			t.Errorf("give Node %s back to kwok: %v", name, err)
		}
	}
	if err := setNodeReady(ctx, c, name, corev1.ConditionTrue, "KubeletReady"); err != nil {
		t.Errorf("Node %s Ready: %v", name, err)
	}
}

func setNodeReady(ctx context.Context, c client.Client, name string, status corev1.ConditionStatus, reason string) error {
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	found := false
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason, found = status, reason, true
			n.Status.Conditions[i].Message = "set by " + reason
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason})
	}
	return c.Status().Patch(ctx, &n, patch)
}
