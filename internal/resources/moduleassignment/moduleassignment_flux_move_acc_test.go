package moduleassignment_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccModuleAssignment_fluxEngineMove: an assignment of two ordered modules (`app` depends on
// `base`) created delivering directly moves to Flux by an update (never -/+ replace), module by
// module, wave by wave (update_limit = 1): no object of either module is deleted or re-created on
// the way (every UID stays), every (module, cluster) has its Kustomization afterwards, app's
// depending on base's, the objects are kustomize-controller's and no longer under the modules'
// own field managers, the direct engine's records are gone from the workload clusters, nothing is
// in the invalid ledger, and a plan shows no change. Then it moves back to direct delivery the
// same way: the same UIDs, no Kustomization or OCIRepository left, no Flux record left, the
// objects under the modules' field managers alone (kustomize-controller's fields taken over),
// and a plan shows no change.
func TestAccModuleAssignment_fluxEngineMove(t *testing.T) {
	acctest.OnOneLane(t, 1) // what a move does to the fleet; the rollout's move runs on both CLIs
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxmovemod")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	clusters := []string{"prod-eu-1", "prod-us-1"}
	newLabeler(t, f, name, clusters...)
	base := module{name: "base", version: "1.0.0", manifests: configMaps(name, "v1", "base")}
	app := module{name: "app", version: "1.0.0", dependsOn: []string{"base"},
		manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  setting: \"v1\"\n", name)}
	keyOf := func(module string) records.Key {
		return records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + "." + module}
	}
	direct := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, `update_limit = "1"`, base, app)
	flux := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, fmt.Sprintf(`update_limit = "1"
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name)), base, app)
	// The modules' objects on each cluster, by module: their UIDs must never change.
	objects := map[string][]client.Object{
		"base": {&corev1.Namespace{}, &corev1.ConfigMap{}},
		"app":  {&corev1.ConfigMap{}},
	}
	keys := map[string][]client.ObjectKey{
		"base": {{Name: name}, {Namespace: name, Name: "base"}},
		"app":  {{Namespace: name, Name: "app"}},
	}
	uids := map[string]types.UID{}
	// sameObjects records each object's UID the first time and compares it afterwards, and
	// checks which of the module's field manager and kustomize-controller manage the ConfigMaps.
	sameObjects := func(onFlux bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, c := range clusters {
				wc, err := f.WorkloadClient(c)
				if err != nil {
					return err
				}
				for module, objs := range objects {
					for i, obj := range objs {
						k := keys[module][i]
						if err := wc.Get(ctx, k, obj); err != nil {
							return fmt.Errorf("%s: module %s's %s: %w", c, module, k, err)
						}
						id := c + "/" + k.String()
						if was, seen := uids[id]; seen && was != obj.GetUID() {
							return fmt.Errorf("%s: module %s's %s was re-created (uid %s, was %s)", c, module, k, obj.GetUID(), was)
						}
						uids[id] = obj.GetUID()
						if _, cm := obj.(*corev1.ConfigMap); !cm {
							continue
						}
						if err := expectSetting(f, c, k.Namespace, k.Name, "v1"); err != nil {
							return err
						}
						var managers []string
						for _, m := range obj.GetManagedFields() {
							managers = append(managers, m.Manager)
						}
						own, kc := slices.Contains(managers, keyOf(module).FieldManager()), slices.Contains(managers, fluxdelivery.ControllerFieldManager)
						if own == onFlux || kc != onFlux {
							return fmt.Errorf("%s: module %s's %s managed by %v (through Flux: %v)", c, module, k, managers, onFlux)
						}
					}
				}
			}
			return noModuleLedger(f, name)
		}
	}
	// records checks, per (module, cluster), that the engine the assignment is on holds the
	// records and the other holds none, and that the Flux objects exist only on Flux.
	engineRecords := func(onFlux bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, c := range clusters {
				wc, err := f.WorkloadClient(c)
				if err != nil {
					return err
				}
				for _, module := range []string{"base", "app"} {
					key := keyOf(module)
					onDirect, err := records.NewWorkloadStore(wc, records.DefaultNamespace).Load(ctx, key)
					if err != nil {
						return err
					}
					viaFlux, err := records.NewWorkloadStore(mc, records.DefaultNamespace).Load(ctx, delivery.FluxRecordKey(key, c))
					if err != nil {
						return err
					}
					if (onDirect.Current != nil) == onFlux || (viaFlux.Current != nil) != onFlux || onDirect.Provisioning != nil || viaFlux.Provisioning != nil {
						return fmt.Errorf("%s: module %s's records: direct %+v, Flux %+v (through Flux: %v)", c, module, onDirect, viaFlux, onFlux)
					}
					if err := fluxObjects(ctx, mc, f.Namespace, key, c, onFlux); err != nil {
						return err
					}
				}
				if !onFlux {
					continue
				}
				// app's Kustomization waits for base's on the same cluster.
				ks := &unstructured.Unstructured{}
				ks.SetGroupVersionKind(fluxdelivery.KustomizationKind)
				if err := mc.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: fluxdelivery.ObjectName(keyOf("app"), c)}, ks); err != nil {
					return err
				}
				deps, _, _ := unstructured.NestedSlice(ks.Object, "spec", "dependsOn")
				if want := []any{map[string]any{"name": fluxdelivery.ObjectName(keyOf("base"), c)}}; !reflect.DeepEqual(deps, want) {
					return fmt.Errorf("%s: app's Kustomization dependsOn %v, want %v", c, deps, want)
				}
			}
			return nil
		}
	}
	update := []plancheck.PlanCheck{plancheck.ExpectResourceAction("gradual_module_assignment.test", plancheck.ResourceActionUpdate)}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: direct, Check: resource.ComposeTestCheckFunc(sameObjects(false), engineRecords(false))},
			{
				Config:           flux,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update},
				Check:            resource.ComposeTestCheckFunc(sameObjects(true), engineRecords(true)),
			},
			{Config: flux, PlanOnly: true},
			{
				Config:           direct,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update},
				Check:            resource.ComposeTestCheckFunc(sameObjects(false), engineRecords(false)),
			},
			{Config: direct, PlanOnly: true},
		},
	})
}

// fluxObjects checks that module key's Kustomization and OCIRepository for cluster exist
// (exist) or are gone.
func fluxObjects(ctx context.Context, mc client.Client, namespace string, key records.Key, cluster string, exist bool) error {
	for _, gvk := range []schema.GroupVersionKind{fluxdelivery.KustomizationKind, fluxdelivery.OCIRepositoryKind} {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		err := mc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fluxdelivery.ObjectName(key, cluster)}, o)
		switch {
		case exist && err != nil:
			return fmt.Errorf("%s: %s's %s: %w", cluster, key.Name, gvk.Kind, err)
		case !exist && !apierrors.IsNotFound(err):
			return fmt.Errorf("%s: %s's %s: %v, want it gone", cluster, key.Name, gvk.Kind, err)
		}
	}
	return nil
}
