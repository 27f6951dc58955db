package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccRollout_fluxHealthChecks delivers through Flux with verify.health_checks: the rollout's
// expression on ConfigMaps becomes each Kustomization's healthCheckExprs, which
// kustomize-controller evaluates in the management cluster. A revision whose ConfigMap the
// expression calls failed (data.value == 'bad') fails on the canary with HealthCheckFailed, is
// restored (re-pinned, without the expressions, as a direct restore is judged by kstatus alone)
// and recorded invalid; a revision the expression passes goes out to all three clusters.
func TestAccRollout_fluxHealthChecks(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxhc")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	good, bad, next := fluxBundle(name, "good", false), fluxBundle(name, "bad", false), fluxBundle(name, "better", false)
	badRev := fluxRevisionOf(t, bad, fluxRepository(f, name))
	config := func(manifests string) string {
		return acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "test" {
  name      = %q
  namespace = %q
  %s
  canary    = ["staging-eu-1"]
  manifests = <<-EOT
%s  EOT
  verify = {
    timeout = "90s"
    health_checks = [{
      api_version = "v1"
      kind        = "ConfigMap"
      current     = "true"
      failed      = "data.value == 'bad'"
    }]
  }
  delivery = { flux = { repository = %q, insecure = true } }
}
`, name, f.Namespace, allThree, indent(manifests), f.Flux.RegistryURL("gradual/"+name))
	}
	// onClusters checks the ConfigMap's value on every cluster and, with exprs, that the
	// Kustomization carries the rollout's health check.
	onClusters := func(value string, exprs bool) func(*terraform.State) error {
		return func(*terraform.State) error {
			for _, c := range clusters {
				var cm corev1.ConfigMap
				if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
					return fmt.Errorf("%s: the ConfigMap Flux applied: %w", c, err)
				}
				if cm.Data["value"] != value {
					return fmt.Errorf("%s: ConfigMap value %q, want %q", c, cm.Data["value"], value)
				}
				if !exprs {
					continue
				}
				ks := kustomization(f, key, c)
				if err := mc.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
					return fmt.Errorf("%s: its Kustomization: %w", c, err)
				}
				got, _, _ := unstructured.NestedSlice(ks.Object, "spec", "healthCheckExprs")
				if len(got) != 1 || got[0].(map[string]any)["failed"] != "data.value == 'bad'" {
					return fmt.Errorf("%s: Kustomization healthCheckExprs %v, want the rollout's health check", c, got)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Refused at plan no more: the health checks go through Flux.
				Config: config(good),
				Check:  onClusters("good", true),
			},
			{
				// kustomize-controller applies the bad value and its health check says failed
				// (HealthCheckFailed): a failure of the revision on the canary, restored by
				// re-pinning the good revision, recorded invalid. terraform-plugin-testing runs no
				// Check on a step that expects an error: the next step's PreConfig checks.
				Config:      config(bad),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*` + badRev),
			},
			{
				PreConfig: func() {
					if err := onClusters("good", false)(nil); err != nil {
						t.Fatalf("after the failed apply: %v", err)
					}
					ledger, err := records.NewManagementStore(mc, records.DefaultNamespace).Ledger(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					if len(ledger) != 1 || ledger[0].Revision != badRev {
						t.Fatalf("ledger %+v, want %s invalid", ledger, badRev)
					}
					// The reason is the health check as kustomize-controller reported it, not a timeout.
					if !regexp.MustCompile(`(?i)health check`).MatchString(ledger[0].Reason) {
						t.Fatalf("ledger reason %q, want kustomize-controller's failed health check", ledger[0].Reason)
					}
				},
				Config:   config(bad),
				PlanOnly: true, ExpectError: regexp.MustCompile(`Revision Recorded Invalid`),
			},
			{
				// A revision the health check passes goes out to all three clusters.
				Config: config(next),
				Check:  onClusters("better", true),
			},
		},
	})
}
