package moduleassignment_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// The Flux fault tests of the module assignment, as the rollout's (TestAccRollout_fluxControllerStopped,
// TestAccRollout_fluxRegistryDown): one module, base, with a ConfigMap whose setting goes from
// one to two, canary first.

var fluxFaultClusters = []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}

// fluxFaultConfig is the assignment of base at setting (its version), delivered through Flux with
// staging-eu-1 as the canary and a verify timeout of timeout.
func fluxFaultConfig(f *testbed.Fleet, name, setting, timeout string, extra ...string) string {
	base := module{name: "base", version: setting, manifests: configMaps(name, setting, "base")}
	c := assignmentConfig(f, "test", name, name, fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name))+strings.Join(extra, ""), base)
	return strings.Replace(c, `verify    = { timeout = "60s" }`, fmt.Sprintf(`verify    = { timeout = %q }`, timeout), 1)
}

// fluxFaultSettings checks that base's ConfigMap, as Flux applied it, holds setting on every
// cluster.
func fluxFaultSettings(f *testbed.Fleet, name, setting string) error {
	for _, c := range fluxFaultClusters {
		if err := expectSetting(f, c, name, "base", setting); err != nil {
			return err
		}
	}
	return nil
}

// moduleLedger is the invalid-revision ledger of the assignment's module.
func moduleLedger(f *testbed.Fleet, name, module string) ([]records.InvalidEntry, error) {
	mc, err := f.ManagementClient()
	if err != nil {
		return nil, err
	}
	return records.NewManagementStore(mc, records.DefaultNamespace).Ledger(context.Background(),
		records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + "." + module})
}

func noModuleLedger(f *testbed.Fleet, name string) error {
	ledger, err := moduleLedger(f, name, "base")
	if err != nil {
		return err
	}
	if len(ledger) > 0 {
		return fmt.Errorf("ledger %+v: a Flux fault made the module's revision invalid", ledger)
	}
	return nil
}

// TestAccModuleAssignment_fluxControllerStopped freezes Flux's kustomize-controller (SIGSTOP)
// before a new version of the module goes out: the canary's Kustomization is pinned but nothing
// acts on it, so the canary ends unsettled (lost contact) — a fault of the delivery
// infrastructure, not of the module — the apply fails saying so, and nothing is recorded
// invalid. Once the controller runs again, the same configuration is refused by the engine's
// guard after lost contact (not a ledger entry); with retry_invalid the apply converges. A short
// verify timeout keeps the frozen wait short.
func TestAccModuleAssignment_fluxControllerStopped(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxmstop")
	newLabeler(t, f, name, fluxFaultClusters...)
	config := func(setting string, extra ...string) string {
		return acctest.ProviderConfig(f) + fluxFaultConfig(f, name, setting, "10s", extra...)
	}
	var resume func()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("one"),
				Check:  func(*terraform.State) error { return fluxFaultSettings(f, name, "one") },
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
				Config:      config("two"),
				ExpectError: regexp.MustCompile(`(?s)lost-contact.*staging-eu-1:.*Flux did not attempt`),
			},
			{
				// The failed apply recorded nothing invalid, and left the others on one; the
				// controller runs again.
				PreConfig: func() {
					if err := noModuleLedger(f, name); err != nil {
						t.Error(err)
					}
					for _, c := range []string{"prod-eu-1", "prod-us-1"} {
						if err := expectSetting(f, c, name, "base", "one"); err != nil {
							t.Errorf("past the canary while it was unsettled: %v", err)
						}
					}
					resume()
				},
				// The engine's guard after lost contact (not a ledger entry): the same version is
				// not taken further on that evidence without retry_invalid.
				Config:      config("two"),
				ExpectError: regexp.MustCompile(`Clusters Lost Contact After This Revision`),
			},
			{
				Config: config("two", "\n  retry_invalid = true"),
				Check: func(*terraform.State) error {
					if err := noModuleLedger(f, name); err != nil {
						return err
					}
					return fluxFaultSettings(f, name, "two")
				},
			},
		},
	})
}

// TestAccModuleAssignment_fluxRegistryDown applies a saved plan after the OCI registry stopped
// answering (its process frozen: what a partitioned registry looks like to a client): the apply
// fails with a clear error before anything is written — no Kustomization re-pinned, nothing
// recorded invalid, the clusters unchanged — and once the registry answers again the next plan
// is the same change, and applies. It runs the CLI itself: terraform-plugin-testing cannot
// apply a saved plan later.
func TestAccModuleAssignment_fluxRegistryDown(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.FluxFleet(t)
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	name := acctest.UniqueLabel("fluxmreg")
	key := records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + ".base"}
	newLabeler(t, f, name, fluxFaultClusters...)
	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	write := func(setting string) {
		t.Helper()
		config := acctest.DevOverridesConfig(f) + fluxFaultConfig(f, name, setting, "30s")
		if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if out, _, code := acctest.TryCLI(context.Background(), cli, work, rc, "destroy", "-auto-approve"); code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", code, acctest.Tail(out, 40))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	write("one")
	acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	before := acctest.FluxPins(t, f, key, fluxFaultClusters)

	write("two")
	acctest.RunCLI(ctx, t, cli, work, rc, "plan", "-out=tfplan")
	thaw := acctest.StopProcesses(t, []int{acctest.FluxProcess(t, f, "oci-registry")})
	out, _, code := acctest.TryCLI(ctx, cli, work, rc, "apply", "tfplan")
	thaw()
	if code == 0 {
		t.Fatalf("the saved plan applied with the registry down:\n%s", out)
	}
	if !strings.Contains(out, "Registry Not Usable") {
		t.Errorf("apply with the registry down does not say the registry is not usable:\n%s", out)
	}
	if after := acctest.FluxPins(t, f, key, fluxFaultClusters); !maps.Equal(before, after) {
		t.Errorf("OCIRepositories re-pinned by the failed apply: %v, were %v", after, before)
	}
	if err := noModuleLedger(f, name); err != nil {
		t.Error(err)
	}
	if err := fluxFaultSettings(f, name, "one"); err != nil {
		t.Error(err)
	}
	// The registry answers again: the next plan is the same change, and applies.
	if out, _, code := acctest.TryCLI(ctx, cli, work, rc, "plan", "-detailed-exitcode"); code != 2 {
		t.Fatalf("plan after the registry came back: exit %d, want 2 (the same change):\n%s", code, acctest.Tail(out, 40))
	}
	acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	if err := fluxFaultSettings(f, name, "two"); err != nil {
		t.Error(err)
	}
}
