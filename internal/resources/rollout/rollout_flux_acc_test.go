package rollout_test

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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// fluxBundle is a Namespace and a ConfigMap holding value; broken adds a label value the
// workload API server refuses (kustomize builds it; the server-side dry-run refuses it).
func fluxBundle(ns, value string, broken bool) string {
	labels := ""
	if broken {
		labels = "  labels: {gradual.dev/bad: \"no spaces allowed\"}\n"
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\n%[3]sdata:\n  value: %[2]q\n",
		ns, value, labels)
}

// TestAccRollout_flux delivers through Flux (delivery.flux) on a test bed started with
// `gradual-testbed up --flux`: a good revision goes out in three waves (the canary first) as an
// OCI artifact and one Kustomization per cluster; a revision the workload API server refuses
// fails on the canary, is restored by re-pinning its Kustomization, recorded invalid and refused
// by the next plan; destroy leaves no Kustomization and Flux prunes the objects. It skips on a
// test bed without Flux (tools/testacc.sh starts one for it).
func TestAccRollout_flux(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("flux")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	good, broken, next := fluxBundle(name, "one", false), fluxBundle(name, "two", true), fluxBundle(name, "three", false)
	configAt := func(repository, manifests string) string {
		return rolloutConfig(f, name, allThree, manifests, fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, repository))
	}
	repository := f.Flux.RegistryURL("gradual/" + name)
	goodRev, brokenRev := fluxRevisionOf(t, good, repository), fluxRevisionOf(t, broken, repository)
	config := func(manifests string) string { return configAt(f.Flux.RegistryURL("gradual/"+name), manifests) }
	var onSome func(clusters []string, value string) func(*terraform.State) error
	// onClusters checks the ConfigMap's value on every cluster, and that no record of the
	// rollout was written to a workload cluster (Flux mode keeps them in the management cluster).
	onClusters := func(value string) func(*terraform.State) error {
		return onSome(clusters, value)
	}
	// suspend sets spec.suspend of prod-us-1's Kustomization, as `flux suspend kustomization`
	// (or `flux resume`) does.
	suspend := func(on bool) {
		ks := kustomization(f, key, "prod-us-1")
		patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, on)
		if err := mc.Patch(ctx, ks, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	onSome = func(clusters []string, value string) func(*terraform.State) error {
		return func(*terraform.State) error {
			for _, c := range clusters {
				wc := workloadClient(t, f, c)
				var cm corev1.ConfigMap
				if err := wc.Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
					return fmt.Errorf("%s: the ConfigMap Flux applied: %w", c, err)
				}
				if cm.Data["value"] != value {
					return fmt.Errorf("%s: ConfigMap value %q, want %q", c, cm.Data["value"], value)
				}
				var secrets corev1.SecretList
				if err := wc.List(ctx, &secrets, client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
					return err
				}
				if len(secrets.Items) > 0 {
					return fmt.Errorf("%s: %d record Secrets of %s in the workload cluster; Flux mode keeps them in the management cluster", c, len(secrets.Items), key)
				}
				ks := kustomization(f, key, c)
				if err := mc.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
					return fmt.Errorf("%s: its Kustomization: %w", c, err)
				}
				if ref, _, _ := unstructured.NestedString(ks.Object, "spec", "kubeConfig", "secretRef", "name"); ref != c+"-kubeconfig" {
					return fmt.Errorf("%s: Kustomization kubeConfig.secretRef %q", c, ref)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			var list unstructured.UnstructuredList
			list.SetGroupVersionKind(fluxdelivery.KustomizationKind.GroupVersion().WithKind("KustomizationList"))
			if err := mc.List(ctx, &list, client.InNamespace(f.Namespace), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d Kustomizations of %s left after destroy", len(list.Items), key)
			}
			for _, c := range clusters {
				err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s: the ConfigMap after destroy: %v, want it pruned by Flux", c, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// Refused at plan time, nothing written: a repository that is not oci://, and a
				// registry nothing answers at (port 1 of the loopback address).
				Config: configAt("https://"+f.Flux.Registry+"/gradual/"+name, good), PlanOnly: true,
				ExpectError: regexp.MustCompile(`must be oci://host/path`),
			},
			{
				Config: configAt("oci://127.0.0.1:1/gradual/"+name, good), PlanOnly: true,
				ExpectError: regexp.MustCompile(`Registry Not Usable`),
			},
			{
				Config: config(good),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("revision"), knownvalue.StringExact(goodRev)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"),
						knownvalue.StringRegexp(regexp.MustCompile(`^3 waves`))),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("summary"), knownvalue.MapPartial(map[string]knownvalue.Check{
						"current": knownvalue.Int64Exact(3),
					})),
				},
				Check: onClusters("one"),
			},
			{
				// The canary's Kustomization reports the dry-run refusal: a revision failure,
				// restored by re-pinning to the good revision and recorded invalid.
				// terraform-plugin-testing runs no Check on a step that expects an error: the
				// clusters are checked by the next step's PreConfig, before it plans.
				Config:      config(broken),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*` + brokenRev),
			},
			{
				// Every cluster still has the good revision's ConfigMap (the canary's restored by
				// the re-pin, the others never pinned to the broken one).
				PreConfig: func() {
					if err := onClusters("one")(nil); err != nil {
						t.Fatalf("after the failed apply: %v", err)
					}
				},
				Config:   config(broken),
				PlanOnly: true, ExpectError: regexp.MustCompile(`Revision Recorded Invalid`),
			},
			{
				Config: config(good),
				Check: func(s *terraform.State) error {
					ledger, err := records.NewManagementStore(mc, records.DefaultNamespace).Ledger(ctx, key)
					if err != nil {
						return err
					}
					if len(ledger) != 1 || ledger[0].Revision != brokenRev || strings.Join(ledger[0].Clusters, ",") != "staging-eu-1" {
						return fmt.Errorf("ledger %+v, want %s invalid on staging-eu-1", ledger, brokenRev)
					}
					// The reason is the workload API server's refusal as kustomize-controller
					// reported it, not a timeout.
					if !regexp.MustCompile(`dry-run failed.*Invalid value`).MatchString(ledger[0].Reason) {
						return fmt.Errorf("ledger reason %q, want kustomize-controller's dry-run refusal", ledger[0].Reason)
					}
					return onClusters("one")(s)
				},
			},
			{
				// A Kustomization suspended by hand (`flux suspend`): its cluster is skipped with
				// the reason, not waited on and failed; the others get the next revision.
				PreConfig: func() { suspend(true) },
				Config:    config(next),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("skipped"), knownvalue.MapExact(map[string]knownvalue.Check{
						"prod-us-1": knownvalue.StringRegexp(regexp.MustCompile(`Kustomization is suspended.*flux resume kustomization`)),
					})),
				},
				Check: func(s *terraform.State) error {
					if err := onSome([]string{"prod-eu-1", "staging-eu-1"}, "three")(s); err != nil {
						return err
					}
					return onSome([]string{"prod-us-1"}, "one")(s)
				},
			},
			{
				// Resumed: the next apply brings it to the revision.
				PreConfig: func() { suspend(false) },
				Config:    config(next),
				Check:     onClusters("three"),
			},
			{
				// Import finds the engine in the management cluster's record and reads the
				// per-cluster records there: the same state, every cluster current.
				ResourceName:                         "gradual_rollout.test",
				ImportState:                          true,
				ImportStateId:                        f.Namespace + "/" + name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				ImportStateVerifyIgnore:              []string{"timeouts", "waves"},
			},
		},
	})
}

// kustomization is the Flux Kustomization the Flux engine keeps for key on cluster.
func kustomization(f *testbed.Fleet, key records.Key, cluster string) *unstructured.Unstructured {
	k := fluxdelivery.KustomizationKind
	return testbed.FluxObject(k.GroupVersion().String(), k.Kind, f.Namespace, fluxdelivery.ObjectName(key, cluster))
}
