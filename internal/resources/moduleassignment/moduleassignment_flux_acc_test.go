package moduleassignment_test

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestAccModuleAssignment_flux delivers two ordered modules through Flux (delivery.flux) on a
// test bed started with `gradual-testbed up --flux`: `base` makes a Namespace and a ConfigMap,
// `app` (depends_on base) a ConfigMap in that Namespace, so Flux can apply it only after base.
// Each (module, cluster) gets its own Kustomization, app's with dependsOn naming base's on the
// same cluster; the objects arrive in the workload clusters, with no record there. Between
// applies, Flux repairs an edited object (Reconcile), while a second assignment in ApplyOnce
// mode keeps the edit (Flux's IfNotPresent). A cluster that joins gets both modules in order on
// the next apply, one that leaves loses them (Flux prunes), a registry that cannot be pushed to
// and a mode change are refused at plan time, and destroy leaves no Kustomization,
// OCIRepository, record or object. It skips on a test bed without Flux (tools/testacc.sh's Flux
// stage starts one for it).
func TestAccModuleAssignment_flux(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxmod")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	l := newLabeler(t, f, name, "prod-eu-1", "prod-us-1")
	onceNS := name + "-once"
	base := module{name: "base", version: "1.0.0", manifests: configMaps(name, "v1", "base")}
	app := module{name: "app", version: "1.0.0", dependsOn: []string{"base"},
		manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  setting: \"v1\"\n", name)}
	pinned := module{name: "pinned", version: "1.0.0", manifests: configMaps(onceNS, "v1", "pinned")}
	moduleKey := func(assignment, module string) records.Key {
		return records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: assignment + "." + module}
	}
	delivery := func(repository string) string {
		return fmt.Sprintf("update_limit = \"100%%\"\n  delivery = { flux = { repository = %q, insecure = true } }", repository)
	}
	configAt := func(repo, extra, onceMode string) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, delivery(repo)+"\n  "+extra, base, app) +
			assignmentConfig(f, "once", name+"-once", name, delivery(repo+"-once")+"\n  mode = "+onceMode, pinned)
	}
	configWith := func(extra, onceMode string) string {
		return configAt(f.Flux.RegistryURL("gradual/"+name), extra, onceMode)
	}
	config := configWith("", `"ApplyOnce"`)
	ks := func(key records.Key, cluster string) *unstructured.Unstructured {
		k := fluxdelivery.KustomizationKind
		return testbed.FluxObject(k.GroupVersion().String(), k.Kind, f.Namespace, fluxdelivery.ObjectName(key, cluster))
	}
	// pinnedIs checks the ApplyOnce assignment's ConfigMap on each cluster.
	pinnedIs := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for c, v := range want {
				if err := expectSetting(f, c, onceNS, "pinned", v); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// delivered checks, on each cluster, that both modules' objects arrived through Flux, that
	// app's Kustomization depends on base's there (and base's on nothing), and that no record
	// was written to the workload cluster.
	delivered := func(clusters ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, c := range clusters {
				for _, cm := range []string{"base", "app"} {
					if err := expectSetting(f, c, name, cm, "v1"); err != nil {
						return err
					}
				}
				want := map[string][]any{"base": nil, "app": {map[string]any{"name": fluxdelivery.ObjectName(moduleKey(name, "base"), c)}}}
				for module, deps := range want {
					o := ks(moduleKey(name, module), c)
					if err := mc.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
						return fmt.Errorf("%s: the Kustomization of module %s: %w", c, module, err)
					}
					got, _, _ := unstructured.NestedSlice(o.Object, "spec", "dependsOn")
					if !reflect.DeepEqual(got, deps) {
						return fmt.Errorf("%s: module %s's Kustomization dependsOn %v, want %v", c, module, got, deps)
					}
				}
				wc, err := f.WorkloadClient(c)
				if err != nil {
					return err
				}
				var secrets corev1.SecretList
				if err := wc.List(ctx, &secrets, client.MatchingLabels{records.LabelManagedBy: records.ManagedBy}); err != nil {
					return err
				}
				for _, s := range secrets.Items {
					if strings.Contains(s.Annotations[records.AnnotationRolloutKey], name) {
						return fmt.Errorf("%s: record Secret %s in the workload cluster; Flux mode keeps them in the management cluster", c, s.Name)
					}
				}
			}
			return nil
		}
	}
	// editedThenReconciled edits a ConfigMap of each mode on prod-eu-1 by hand, has Flux
	// reconcile both Kustomizations (as `flux reconcile kustomization` does) and waits until it
	// did: Reconcile's edit is repaired, ApplyOnce's (IfNotPresent) stays.
	editedThenReconciled := func(*terraform.State) error {
		wc, err := f.WorkloadClient("prod-eu-1")
		if err != nil {
			return err
		}
		token := time.Now().Format(time.RFC3339Nano)
		for _, c := range []struct {
			ns, cm string
			key    records.Key
		}{{name, "base", moduleKey(name, "base")}, {onceNS, "pinned", moduleKey(name+"-once", "pinned")}} {
			patch := []byte(`{"data":{"setting":"edited"}}`)
			if err := wc.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.cm}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return err
			}
			req := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, token))
			if err := mc.Patch(ctx, ks(c.key, "prod-eu-1"), client.RawPatch(types.MergePatchType, req)); err != nil {
				return err
			}
		}
		for _, key := range []records.Key{moduleKey(name, "base"), moduleKey(name+"-once", "pinned")} {
			o := ks(key, "prod-eu-1")
			deadline := time.Now().Add(60 * time.Second)
			for {
				if err := mc.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
					return err
				}
				handled, _, _ := unstructured.NestedString(o.Object, "status", "lastHandledReconcileAt")
				if handled == token {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("kustomize-controller did not handle the reconcile request of %s within 60s", key)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
		if err := expectSetting(f, "prod-eu-1", name, "base", "v1"); err != nil {
			return fmt.Errorf("mode Reconcile: Flux did not repair the edit: %w", err)
		}
		if err := expectSetting(f, "prod-eu-1", onceNS, "pinned", "edited"); err != nil {
			return fmt.Errorf("mode ApplyOnce: Flux re-applied the object: %w", err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, kind := range []string{"KustomizationList", "OCIRepositoryList"} {
				gv := fluxdelivery.KustomizationKind.GroupVersion()
				if kind == "OCIRepositoryList" {
					gv = fluxdelivery.OCIRepositoryKind.GroupVersion()
				}
				for _, key := range []records.Key{moduleKey(name, "base"), moduleKey(name, "app"), moduleKey(name+"-once", "pinned")} {
					var list unstructured.UnstructuredList
					list.SetGroupVersionKind(gv.WithKind(kind))
					if err := mc.List(ctx, &list, client.InNamespace(f.Namespace), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
						return err
					}
					if len(list.Items) > 0 {
						return fmt.Errorf("%d %s items of %s left after destroy", len(list.Items), kind, key)
					}
				}
			}
			// No record of the assignment or its modules is left in the management cluster.
			var secrets corev1.SecretList
			var maps corev1.ConfigMapList
			var left []metav1.ObjectMeta
			for _, list := range []client.ObjectList{&secrets, &maps} {
				if err := mc.List(ctx, list, client.InNamespace(records.DefaultNamespace), client.MatchingLabels{records.LabelManagedBy: records.ManagedBy}); err != nil {
					return err
				}
			}
			for _, o := range secrets.Items {
				left = append(left, o.ObjectMeta)
			}
			for _, o := range maps.Items {
				left = append(left, o.ObjectMeta)
			}
			for _, o := range left {
				if strings.Contains(o.Annotations[records.AnnotationRolloutKey], name) {
					return fmt.Errorf("record %s (%s) left after destroy", o.Name, o.Annotations[records.AnnotationRolloutKey])
				}
			}
			for _, c := range []string{"prod-eu-1", "prod-us-1", "staging-eu-1"} {
				for _, cm := range [][2]string{{name, "base"}, {name, "app"}, {onceNS, "pinned"}} {
					if err := expectSetting(f, c, cm[0], cm[1], "<none>"); err != nil {
						return fmt.Errorf("after destroy, want it pruned by Flux: %w", err)
					}
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// Refused at plan time, nothing written: a registry nothing answers at (port 1 of
				// the loopback address), and what Flux mode cannot do yet, naming the attribute.
				Config: configAt("oci://127.0.0.1:1/gradual/"+name, "", `"ApplyOnce"`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`Registry Not Usable`),
			},
			{
				Config: configWith(`adopt = false`, `"ApplyOnce"`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`Adoption Cannot Be Refused Through Flux`),
			},
			{
				// Both modules to both clusters, base first: one wave each.
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					summaryIs(res, map[string]int64{"current": 2}), noAttention(res),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.MapExact(map[string]knownvalue.Check{
						"base": knownvalue.StringExact("1 wave of 2 clusters"), "app": knownvalue.StringExact("1 wave of 2 clusters"),
					})),
				},
				Check: resource.ComposeAggregateTestCheckFunc(delivered("prod-eu-1", "prod-us-1"),
					pinnedIs(map[string]string{"prod-eu-1": "v1", "prod-us-1": "v1"}), editedThenReconciled,
					func(*terraform.State) error {
						// ApplyOnce is on the Kustomization, not in the artifact: the IfNotPresent annotation.
						o := ks(moduleKey(name+"-once", "pinned"), "prod-eu-1")
						if err := mc.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
							return err
						}
						if v, _, _ := unstructured.NestedString(o.Object, "spec", "commonMetadata", "annotations", fluxdelivery.AnnotationSSA); v != fluxdelivery.SSAIfNotPresent {
							return fmt.Errorf("the ApplyOnce module's Kustomization: commonMetadata %s = %q, want %s", fluxdelivery.AnnotationSSA, v, fluxdelivery.SSAIfNotPresent)
						}
						return nil
					}),
			},
			{
				// staging-eu-1 joins: the next apply gives it both modules, base first, each in
				// a wave of its own. The ApplyOnce edit on prod-eu-1 stays (nothing re-applies it).
				PreConfig: func() { l.set("staging-eu-1", true) },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					wavesAre(res, "base", "1 wave of 1 cluster"), wavesAre(res, "app", "1 wave of 1 cluster"),
					attentionBefore{res: res, cluster: "staging-eu-1", want: []string{"joining"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 3}), noAttention(res)},
				Check: resource.ComposeAggregateTestCheckFunc(delivered("prod-eu-1", "prod-us-1", "staging-eu-1"),
					pinnedIs(map[string]string{"prod-eu-1": "edited", "prod-us-1": "v1", "staging-eu-1": "v1"})),
			},
			{
				// prod-us-1 leaves: its Kustomizations are deleted, app's first, and Flux prunes
				// both modules there; the other clusters keep them.
				PreConfig: func() { l.set("prod-us-1", false) },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					attentionBefore{res: res, cluster: "prod-us-1", want: []string{"leaving"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2}), noAttention(res)},
				Check: resource.ComposeAggregateTestCheckFunc(delivered("prod-eu-1", "staging-eu-1"),
					func(*terraform.State) error {
						for _, cm := range []string{"base", "app"} {
							if err := expectSetting(f, "prod-us-1", name, cm, "<none>"); err != nil {
								return fmt.Errorf("after prod-us-1 left, want Flux to have pruned it: %w", err)
							}
							o := ks(moduleKey(name, cm), "prod-us-1")
							if err := mc.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
								return fmt.Errorf("module %s's Kustomization on prod-us-1 after it left: %v, want it deleted", cm, err)
							}
						}
						return nil
					}),
			},
			{
				// The mode lives in the clusters' Kustomizations: changing it is refused.
				Config: configWith("", `"Reconcile"`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`Mode Change Not Delivered Through Flux Yet`),
			},
			{
				// Import finds the engine in the management cluster's record. (`waves` and
				// `leaving` say what the last apply did: an import did none.)
				ResourceName: res, ImportState: true, ImportStateId: f.Namespace + "/" + name,
				ImportStateVerify: true, ImportStateVerifyIdentifierAttribute: "id", ImportStateVerifyIgnore: []string{"timeouts", "waves", "leaving"},
			},
		},
	})
}
