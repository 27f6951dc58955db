package moduleassignment_test

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
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
	m := newMoveFixture(t, "fluxmovemod", `update_limit = "1"`)
	update := []plancheck.PlanCheck{plancheck.ExpectResourceAction("gradual_module_assignment.test", plancheck.ResourceActionUpdate)}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: m.direct, Check: m.onEngines(m.clusters...)},
			{
				Config:           m.flux,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update},
				Check:            m.onEngines(),
			},
			{Config: m.flux, PlanOnly: true},
			{
				Config:           m.direct,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update},
				Check:            m.onEngines(m.clusters...),
			},
			{Config: m.direct, PlanOnly: true},
		},
	})
}

// moveFixture is an assignment of two ordered modules on two clusters (`base`: a Namespace and a
// ConfigMap; `app`, depending on base: a ConfigMap in that Namespace), delivered directly
// (direct) or through Flux (flux), and what a move between the two must leave.
type moveFixture struct {
	t            *testing.T
	f            *testbed.Fleet
	mc           client.Client
	name         string
	clusters     []string
	direct, flux string
	// uids are the UID of each object of the modules on each cluster the first time it was seen:
	// a move must never delete or re-create one.
	uids map[string]types.UID
	// applyOnce: through Flux, kustomize-controller creates only what is missing
	// (IfNotPresent), so it takes over no field of the objects the move finds in place.
	applyOnce bool
}

func newMoveFixture(t *testing.T, prefix, extra string) *moveFixture {
	f := acctest.FluxFleet(t)
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	m := &moveFixture{t: t, f: f, mc: mc, name: acctest.UniqueLabel(prefix), clusters: []string{"prod-eu-1", "prod-us-1"}, uids: map[string]types.UID{}}
	newLabeler(t, f, m.name, m.clusters...)
	base := module{name: "base", version: "1.0.0", manifests: configMaps(m.name, "v1", "base")}
	app := module{name: "app", version: "1.0.0", dependsOn: []string{"base"},
		manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  setting: \"v1\"\n", m.name)}
	m.direct = acctest.ProviderConfig(f) + assignmentConfig(f, "test", m.name, m.name, extra, base, app)
	m.flux = acctest.ProviderConfig(f) + assignmentConfig(f, "test", m.name, m.name, extra+fmt.Sprintf(`
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+m.name)), base, app)
	return m
}

func (m *moveFixture) key(module string) records.Key {
	return records.Key{Kind: records.KindModule, Namespace: m.f.Namespace, Name: m.name + "." + module}
}

// onEngines checks that the clusters named (direct) run both modules delivered directly and the
// others through Flux: on each, the objects are the ones first seen (same UIDs) and hold their
// content, the ConfigMaps are managed by the module's field manager or by kustomize-controller
// alone, that engine holds the module's records and the other none, the Kustomization and the
// OCIRepository it names exist only through Flux (app's depending on base's; with every cluster
// direct, no OCIRepository of the module is left), and the invalid ledger is empty: a move
// never fails a module's content.
func (m *moveFixture) onEngines(direct ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, c := range m.clusters {
			onFlux := !slices.Contains(direct, c)
			for _, module := range []string{"base", "app"} {
				if err := m.sameObjects(c, module, onFlux); err != nil {
					return err
				}
				if err := m.engineRecords(c, module, onFlux); err != nil {
					return err
				}
			}
			if err := m.fluxDependsOn(c, onFlux); err != nil {
				return err
			}
		}
		for _, module := range []string{"base", "app"} {
			if ledger, err := moduleLedger(m.f, m.name, module); err != nil || len(ledger) > 0 {
				return fmt.Errorf("module %s's invalid ledger: %+v (%v), want empty: the content never failed", module, ledger, err)
			}
			if len(direct) == len(m.clusters) {
				if err := noneLeft(context.Background(), m.mc, m.f.Namespace, m.key(module)); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// sameObjects checks module's objects on cluster c: the UIDs first seen, their content, and
// which of the module's field manager and kustomize-controller manage the ConfigMaps.
func (m *moveFixture) sameObjects(c, module string, onFlux bool) error {
	objects := map[string][]client.Object{"base": {&corev1.Namespace{}, &corev1.ConfigMap{}}, "app": {&corev1.ConfigMap{}}}
	keys := map[string][]client.ObjectKey{"base": {{Name: m.name}, {Namespace: m.name, Name: "base"}}, "app": {{Namespace: m.name, Name: "app"}}}
	wc, err := m.f.WorkloadClient(c)
	if err != nil {
		return err
	}
	for i, obj := range objects[module] {
		k := keys[module][i]
		if err := wc.Get(context.Background(), k, obj); err != nil {
			return fmt.Errorf("%s: module %s's %s: %w", c, module, k, err)
		}
		id := c + "/" + k.String()
		if was, seen := m.uids[id]; seen && was != obj.GetUID() {
			return fmt.Errorf("%s: module %s's %s was re-created (uid %s, was %s)", c, module, k, obj.GetUID(), was)
		}
		m.uids[id] = obj.GetUID()
		cm, isCM := obj.(*corev1.ConfigMap)
		if !isCM {
			continue
		}
		if cm.Data["setting"] != "v1" {
			return fmt.Errorf("%s: module %s's %s holds %v, want setting v1", c, module, k, cm.Data)
		}
		var managers []string
		for _, f := range obj.GetManagedFields() {
			managers = append(managers, f.Manager)
		}
		own, kc := slices.Contains(managers, m.key(module).FieldManager()), slices.Contains(managers, fluxdelivery.ControllerFieldManager)
		if own == onFlux || (kc != onFlux && !m.applyOnce) {
			return fmt.Errorf("%s: module %s's %s managed by %v (through Flux: %v)", c, module, k, managers, onFlux)
		}
	}
	return nil
}

// engineRecords checks that the engine module is on, on cluster c, holds its records and the
// other none, and that the Flux objects exist only through Flux.
func (m *moveFixture) engineRecords(c, module string, onFlux bool) error {
	ctx := context.Background()
	wc, err := m.f.WorkloadClient(c)
	if err != nil {
		return err
	}
	key := m.key(module)
	onDirect, err := records.NewWorkloadStore(wc, records.DefaultNamespace).Load(ctx, key)
	if err != nil {
		return err
	}
	viaFlux, err := records.NewWorkloadStore(m.mc, records.DefaultNamespace).Load(ctx, delivery.FluxRecordKey(key, c))
	if err != nil {
		return err
	}
	if (onDirect.Current != nil) == onFlux || (viaFlux.Current != nil) != onFlux || onDirect.Provisioning != nil || viaFlux.Provisioning != nil {
		return fmt.Errorf("%s: module %s's records: direct %+v, Flux %+v (through Flux: %v)", c, module, onDirect, viaFlux, onFlux)
	}
	return fluxObjects(ctx, m.mc, m.f.Namespace, key, c, onFlux)
}

// fluxDependsOn checks, through Flux, that app's Kustomization waits for base's on cluster c.
func (m *moveFixture) fluxDependsOn(c string, onFlux bool) error {
	if !onFlux {
		return nil
	}
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(fluxdelivery.KustomizationKind)
	if err := m.mc.Get(context.Background(), client.ObjectKey{Namespace: m.f.Namespace, Name: fluxdelivery.ObjectName(m.key("app"), c)}, ks); err != nil {
		return err
	}
	deps, _, _ := unstructured.NestedSlice(ks.Object, "spec", "dependsOn")
	if want := []any{map[string]any{"name": fluxdelivery.ObjectName(m.key("base"), c)}}; !reflect.DeepEqual(deps, want) {
		return fmt.Errorf("%s: app's Kustomization dependsOn %v, want %v", c, deps, want)
	}
	return nil
}

// fluxObjects checks that module key's Kustomization for cluster and the OCIRepository it names
// exist (exist), or that the Kustomization is gone. The OCIRepositories are the namespace's,
// shared by the clusters on one artifact: noneLeft checks that none is left once no cluster
// runs the module through Flux.
func fluxObjects(ctx context.Context, mc client.Client, namespace string, key records.Key, cluster string, exist bool) error {
	if exist {
		_, err := acctest.FluxSource(ctx, mc, namespace, key, cluster)
		return err
	}
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(fluxdelivery.KustomizationKind)
	if err := mc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fluxdelivery.ObjectName(key, cluster)}, ks); !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %s's Kustomization: %v, want it gone", cluster, key.Name, err)
	}
	return nil
}

// noneLeft checks that module key has no OCIRepository left in namespace.
func noneLeft(ctx context.Context, mc client.Client, namespace string, key records.Key) error {
	if sources, err := acctest.FluxSources(ctx, mc, namespace, key); err != nil || len(sources) > 0 {
		return fmt.Errorf("%s's OCIRepositories with no cluster on Flux: %v (%v), want none", key.Name, sources, err)
	}
	return nil
}

// TestAccModuleAssignment_fluxEngineMoveApplyOnce: with mode = "ApplyOnce", which applies
// nothing again to a cluster that has a module, the move still takes every module to Flux and
// back, by updates, every object kept (same UIDs), each engine's records where they belong, and
// no change planned after each move.
func TestAccModuleAssignment_fluxEngineMoveApplyOnce(t *testing.T) {
	acctest.OnOneLane(t, 0) // what a move does to the fleet, not how a CLI drives it
	m := newMoveFixture(t, "fluxmovemodo", `update_limit = "1"
  mode = "ApplyOnce"`)
	m.applyOnce = true
	update := []plancheck.PlanCheck{plancheck.ExpectResourceAction("gradual_module_assignment.test", plancheck.ResourceActionUpdate)}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: m.direct, Check: m.onEngines(m.clusters...)},
			{Config: m.flux, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update}, Check: m.onEngines()},
			{Config: m.flux, PlanOnly: true},
			{Config: m.direct, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update}, Check: m.onEngines(m.clusters...)},
			{Config: m.direct, PlanOnly: true},
		},
	})
}

// TestAccModuleAssignment_fluxEngineMoveRefused: moving to Flux, one cluster refuses what
// kustomize-controller applies there (a ValidatingAdmissionPolicy denies ConfigMaps carrying
// Flux's labels in the modules' Namespace), while the same content runs there delivered
// directly. On that cluster base stays on direct delivery, counted as failed within
// max_failures and not written to the invalid ledger (the content did not fail), and app, which
// depends on it, is not moved there either; both keep their objects (same UIDs) and their direct
// records, with no Kustomization left. The other cluster moves. The move is remembered: once the
// policy is gone, the next plan (an update) moves the last cluster, and a plan after it shows no
// change.
func TestAccModuleAssignment_fluxEngineMoveRefused(t *testing.T) {
	acctest.OnOneLane(t, 1) // what a refused move leaves on each cluster, not how a CLI drives it
	m := newMoveFixture(t, "fluxmovemodr", `update_limit = "1"
  max_failures = "1"`)
	const refusing = "prod-us-1"
	ctx := context.Background()
	wc, err := m.f.WorkloadClient(refusing)
	if err != nil {
		t.Fatal(err)
	}
	policy := refuseFluxPolicy(m.name)
	t.Cleanup(func() {
		for _, o := range policy {
			_ = wc.Delete(context.Background(), o)
		}
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: m.direct, Check: m.onEngines(m.clusters...)},
			{
				PreConfig: func() {
					for _, o := range policy {
						if err := wc.Create(ctx, o); err != nil {
							t.Fatalf("%s: %v", refusing, err)
						}
					}
					waitRefusesFlux(t, wc, m.name)
				},
				Config: m.flux,
				Check:  m.onEngines(refusing),
				// The cluster left on direct delivery is still to move: the next plan moves it.
				ExpectNonEmptyPlan: true,
			},
			{
				PreConfig: func() {
					for _, o := range policy {
						if err := wc.Delete(ctx, o); err != nil {
							t.Fatalf("%s: %v", refusing, err)
						}
					}
				},
				Config: m.flux,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_module_assignment.test", plancheck.ResourceActionUpdate),
				}},
				Check: m.onEngines(),
			},
			{Config: m.flux, PlanOnly: true},
		},
	})
}

// refuseFluxPolicy is a ValidatingAdmissionPolicy and its binding that deny, in namespace ns,
// ConfigMaps carrying the label kustomize-controller puts on what it applies (as the rollout's
// move tests use it).
func refuseFluxPolicy(ns string) []client.Object {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{
				"resourceRules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"},
					"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"}}},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
			},
			"validations": []any{map[string]any{
				"expression": "!has(object.metadata.labels) || !('kustomize.toolkit.fluxcd.io/name' in object.metadata.labels)",
				"message":    "this cluster takes no ConfigMap from Flux here",
			}},
		},
	}}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": ns},
		"spec":     map[string]any{"policyName": ns, "validationActions": []any{"Deny"}},
	}}
	return []client.Object{p, b}
}

// waitRefusesFlux waits until the policy denies a ConfigMap labelled as Flux labels what it
// applies (a policy takes a moment to be enforced).
func waitRefusesFlux(t *testing.T, wc client.Client, ns string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, "probe"
	cm.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "probe"}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err := wc.Create(context.Background(), cm.DeepCopy(), client.DryRunAll); err != nil && !apierrors.IsNotFound(err) {
			return
		}
	}
	t.Fatal("the ValidatingAdmissionPolicy was not enforced within 30s")
}

// TestAccModuleAssignment_fluxEngineMoveApplyOnceKeptOld: with mode = "ApplyOnce", clusters that
// kept an older version of a module (the configured one changed since) hold content the provider
// no longer has, so a move between engines could not pin the same content: the plan is refused,
// naming the module and the clusters, and nothing is moved (both still on direct delivery, the
// older version in place).
func TestAccModuleAssignment_fluxEngineMoveApplyOnceKeptOld(t *testing.T) {
	acctest.OnOneLane(t, 0) // a plan-time refusal of what a move cannot do, not how a CLI drives it
	m := newMoveFixture(t, "fluxmovemodk", `update_limit = "1"
  mode = "ApplyOnce"`)
	m.applyOnce = true
	base2 := module{name: "base", version: "2.0.0", manifests: configMaps(m.name, "v2", "base")}
	app := module{name: "app", version: "1.0.0", dependsOn: []string{"base"},
		manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  setting: \"v1\"\n", m.name)}
	extra := `update_limit = "1"
  mode = "ApplyOnce"`
	direct2 := acctest.ProviderConfig(m.f) + assignmentConfig(m.f, "test", m.name, m.name, extra, base2, app)
	flux2 := acctest.ProviderConfig(m.f) + assignmentConfig(m.f, "test", m.name, m.name, extra+fmt.Sprintf(`
  delivery = { flux = { repository = %q, insecure = true } }`, m.f.Flux.RegistryURL("gradual/"+m.name)), base2, app)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: m.direct, Check: m.onEngines(m.clusters...)},
			// ApplyOnce: the clusters keep base 1.0.0.
			{Config: direct2, Check: m.onEngines(m.clusters...)},
			{Config: flux2, ExpectError: regexp.MustCompile(`keep\s+an\s+older\s+version\s+of\s+a\s+module[\s\S]*module\s+base\s+\(version\s+2\.0\.0\):\s+prod-eu-1,\s+prod-us-1`)},
			// Nothing moved: both modules still on direct delivery, base 1.0.0 in place.
			{Config: direct2, Check: m.onEngines(m.clusters...)},
		},
	})
}
