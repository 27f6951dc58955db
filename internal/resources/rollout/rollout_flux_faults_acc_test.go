package rollout_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// fluxConfigMaps checks that the ConfigMap Flux applies holds value on each of clusters.
func fluxConfigMaps(t *testing.T, f *testbed.Fleet, ns string, clusters []string, value string) error {
	for _, c := range clusters {
		var cm corev1.ConfigMap
		if err := workloadClient(t, f, c).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
			return fmt.Errorf("%s: the ConfigMap Flux applied: %w", c, err)
		}
		if cm.Data["value"] != value {
			return fmt.Errorf("%s: ConfigMap value %q, want %q", c, cm.Data["value"], value)
		}
	}
	return nil
}

// TestAccRollout_fluxControllerStopped freezes Flux's kustomize-controller (SIGSTOP) before a new
// revision goes out: the canary's Kustomization is pinned but nothing acts on it, so the canary
// ends `unsettled` — a fault of the delivery infrastructure, not of the revision — the apply
// fails saying so and nothing is recorded invalid. Once the controller runs again the next apply
// converges on the revision. A short verify timeout keeps the frozen wait short.
func TestAccRollout_fluxControllerStopped(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxstop")
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	one, two := fluxBundle(name, "one", false), fluxBundle(name, "two", false)
	config := func(manifests string, extra ...string) string {
		c := rolloutConfig(f, name, allThree, manifests, fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name))+strings.Join(extra, ""))
		return strings.Replace(c, `verify = { timeout = "90s" }`, `verify = { timeout = "10s" }`, 1)
	}
	var resume func()
	noLedger := func(*terraform.State) error {
		if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
			return fmt.Errorf("ledger %+v: a stopped Flux controller made the revision invalid", ledger)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config(one),
				Check:  func(*terraform.State) error { return fluxConfigMaps(t, f, name, clusters, "one") },
			},
			{
				PreConfig: func() {
					thaw := acctest.StopProcesses(t, []int{acctest.FluxProcess(t, f, "kustomize-controller")})
					var once sync.Once
					resume = func() { once.Do(thaw) }
					// Resumed by the next step; and in any case within 2 minutes, so that a
					// failing step does not leave destroy waiting on a frozen controller (the
					// Kustomization's finalizer) until the test times out.
					time.AfterFunc(2*time.Minute, resume)
				},
				Config:      config(two),
				ExpectError: regexp.MustCompile(`(?s)` + words("stopped answering after the change began") + `.*lost-contact.*staging-eu-1:.*` + words("Flux did not attempt")),
			},
			{
				// The failed apply recorded nothing invalid; the controller runs again.
				PreConfig: func() {
					if err := noLedger(nil); err != nil {
						t.Error(err)
					}
					resume()
				},
				// The engine's guard after lost contact (not a ledger entry): the same revision
				// is not taken further on that evidence without retry_invalid.
				Config:      config(two),
				ExpectError: regexp.MustCompile(`Clusters Lost Contact After This Revision`),
			},
			{
				Config: config(two, "\n  retry_invalid = true"),
				Check: func(s *terraform.State) error {
					if err := noLedger(s); err != nil {
						return err
					}
					return fluxConfigMaps(t, f, name, clusters, "two")
				},
			},
		},
	})
}

// TestAccRollout_fluxRegistryDown applies a saved plan after the OCI registry stopped answering
// (its process frozen: what a partitioned registry looks like to a client): the apply fails with
// a clear error before anything is written — no Kustomization re-pinned, nothing recorded
// invalid — and once the registry answers again the next plan is the same change.
func TestAccRollout_fluxRegistryDown(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.FluxFleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("fluxreg")
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	config := func(value string) string {
		c := "terraform {\n  required_providers {\n    gradual = { source = \"gradual-dev/gradual\" }\n  }\n}\n" + rolloutConfig(f, name, allThree, fluxBundle(name, value, false), fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name)))
		return strings.Replace(c, `verify = { timeout = "90s" }`, `verify = { timeout = "30s" }`, 1)
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tf.writeConfig(config("one"))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	before := acctest.FluxPins(t, f, key, clusters)

	tf.writeConfig(config("two"))
	tf.mustRun(ctx, 0, "plan", "-out=tfplan")
	thaw := acctest.StopProcesses(t, []int{acctest.FluxProcess(t, f, "oci-registry")})
	res := tf.run(ctx, "apply", "tfplan")
	thaw()
	if res.code == 0 {
		t.Fatalf("the saved plan applied with the registry down:\n%s", res.output)
	}
	if !strings.Contains(res.output, "Registry Not Usable") {
		t.Errorf("apply with the registry down does not say the registry is not usable:\n%s", res.output)
	}
	if after := acctest.FluxPins(t, f, key, clusters); !maps.Equal(before, after) {
		t.Errorf("OCIRepositories re-pinned by the failed apply: %v, were %v", after, before)
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v: a registry outage made the revision invalid", ledger)
	}
	if err := fluxConfigMaps(t, f, name, clusters, "one"); err != nil {
		t.Error(err)
	}
	// The registry answers again: the next plan is the same change, and applies.
	tf.mustRun(ctx, 2, "plan", "-detailed-exitcode")
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	if err := fluxConfigMaps(t, f, name, clusters, "two"); err != nil {
		t.Error(err)
	}
}
