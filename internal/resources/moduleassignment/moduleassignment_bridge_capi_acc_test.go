package moduleassignment_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
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
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestAccCAPIBridge_joinerBetweenApplies: an assignment of two ordered modules with
// follow_joins on; a cluster that joins after the apply gets both modules from Cluster API's
// ClusterResourceSet controller with no Terraform run, within a minute of its control plane
// being up, and the bridge's reading of Cluster API's ClusterResourceSetBinding (what the next
// plan lists) names it with both revisions; the next apply takes it over (bindings, the modules'
// field managers) with no object re-created, as the module's own (destroy deletes them, which it
// never does to adopted objects); a revision recorded invalid never reaches a joiner (the
// bridge keeps the last verified); a revision verified moves the bridge in the same apply;
// destroy removes the bridge.
func TestAccCAPIBridge_joinerBetweenApplies(t *testing.T) {
	name := acctest.UniqueLabel("bridge")
	testJoinerBetweenApplies(t, acctest.CAPIBridgeFleet(t, name), name, false)
}

// TestAccCAPIBridge_fluxJoinerBetweenApplies is TestAccCAPIBridge_joinerBetweenApplies for an
// assignment that delivers through Flux, on a fleet with Flux's controllers beside Cluster
// API's: the bridge is the same ClusterResourceSet, and the apply that takes the joiner over pins
// its Kustomization, whose kustomize-controller applies over the bridge's objects (none
// re-created) and prunes them on destroy.
func TestAccCAPIBridge_fluxJoinerBetweenApplies(t *testing.T) {
	name := acctest.UniqueLabel("fluxbridge")
	testJoinerBetweenApplies(t, acctest.CAPIFluxBridgeFleet(t, name), name, true)
}

func testJoinerBetweenApplies(t *testing.T, f *testbed.Fleet, name string, flux bool) {
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	base := module{name: "base", version: "1.0.0", manifests: configMaps(name, "v1", "base")}
	app := module{name: "app", version: "1.0.0", dependsOn: []string{"base"},
		manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  setting: v1\n", name)}
	// v2 of app never becomes ready (its Deployment's Pods fit no Node): recorded invalid.
	appBroken := app
	appBroken.version = "2.0.0"
	appBroken.manifests = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: %[1]s
data:
  setting: v2
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: %[1]s
spec:
  replicas: 1
  progressDeadlineSeconds: 5
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      nodeSelector: {gradual.dev/no-such-node: "true"}
      containers:
        - name: web
          image: registry.example/web:2
`, name)
	appV3 := app
	appV3.version = "3.0.0"
	appV3.manifests = strings.Replace(app.manifests, "setting: v1", "setting: v3", 1)
	follow := fmt.Sprintf(`follow_joins = { labels = { %q = %q } }`, clusterv1.WatchLabel, testbed.ClusterAPIWatchFilter)
	manager := takeoverManager(f, name, flux)
	if flux {
		follow += fmt.Sprintf("\n  delivery = { flux = { repository = %q, insecure = true } }", f.Flux.RegistryURL("gradual/"+name))
	}
	config := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, follow, base, app)
	broken := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, follow, base, appBroken)
	key := records.Key{Kind: records.KindAssignment, Namespace: f.Namespace, Name: name}
	var uids map[string]types.UID
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			crs := &unstructured.Unstructured{}
			crs.SetAPIVersion("addons.cluster.x-k8s.io/v1beta2")
			crs.SetKind("ClusterResourceSet")
			if err := mc.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: crsbridge.Name(key)}, crs); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the bridge's ClusterResourceSet is still there after destroy (%v)", err)
			}
			for _, m := range []string{"base", "app"} {
				if err := mc.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: crsbridge.ConfigMapName(key, m)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the bridge's ConfigMap of %s is still there after destroy (%v)", m, err)
				}
			}
			// Taken over as the module's own: deleted by destroy (adopted objects are given back).
			return expectSetting(f, "joiner-1", name, "app", "<none>")
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("bridge"), knownvalue.MapExact(map[string]knownvalue.Check{
						"base": knownvalue.NotNull(), "app": knownvalue.NotNull(),
					})),
				},
			},
			{
				// A cluster joins; no Terraform runs until it has both modules.
				PreConfig: func() {
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: "joiner-1", Labels: map[string]string{name: "yes"}, Ready: true, ClusterAPI: true}); err != nil {
						t.Fatalf("join: %v", err)
					}
					up := time.Now()
					uids = acctest.AwaitBridged(t, f, "joiner-1", name, []string{"base", "app"}, time.Minute)
					bridged := time.Since(up)
					// depends_on order: app's objects after base's.
					acctest.ExpectCreatedInOrder(t, f, "joiner-1", name, "base", "app")
					expectGiven(t, f, key, "joiner-1")
					t.Logf("joiner-1: control plane up %s after the join started; both modules there %s after its control plane was up (no Terraform run)",
						up.Sub(t0).Round(100*time.Millisecond), bridged.Round(100*time.Millisecond))
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { return expectTakenOver(f, "joiner-1", name, uids, key, manager) },
				),
			},
			{
				// app v2 fails on the members and is recorded invalid: the bridge keeps v1.
				Config:      broken,
				ExpectError: regexp.MustCompile(`Module Assignment Failed`),
			},
			{
				// A cluster joining now gets app v1 from the bridge, never the invalid v2; going
				// back to v1, the apply takes it over.
				PreConfig: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: "joiner-2", Labels: map[string]string{name: "yes"}, Ready: true, ClusterAPI: true}); err != nil {
						t.Fatalf("join: %v", err)
					}
					acctest.AwaitBridged(t, f, "joiner-2", name, []string{"base", "app"}, time.Minute)
					if err := expectSetting(f, "joiner-2", name, "app", "v1"); err != nil {
						t.Fatalf("the bridge handed out a revision recorded invalid: %v", err)
					}
					c, err := f.WorkloadClient("joiner-2")
					if err != nil {
						t.Fatal(err)
					}
					d := &unstructured.Unstructured{}
					d.SetAPIVersion("apps/v1")
					d.SetKind("Deployment")
					if err := c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "app"}, d); !apierrors.IsNotFound(err) {
						t.Fatalf("joiner-2 holds app v2's Deployment (%v): the bridge handed out a revision recorded invalid", err)
					}
				},
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { return expectSetting(f, "joiner-2", name, "app", "v1") },
				),
			},
			{
				// app v3 is verified on the members: the bridge moves to it in the same apply.
				Config: acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, follow, base, appV3),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						attrs := s.RootModule().Resources[res].Primary.Attributes
						if attrs["bridge.app"] == "" || attrs["bridge.app"] != attrs["revisions.app"] {
							return fmt.Errorf("bridge.app = %q after v3 was verified, want revisions.app %q", attrs["bridge.app"], attrs["revisions.app"])
						}
						cm := &corev1.ConfigMap{}
						if err := mc.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: crsbridge.ConfigMapName(key, "app")}, cm); err != nil {
							return err
						}
						if !strings.Contains(cm.Data["manifests.yaml"], "setting: v3") || cm.Annotations[crsbridge.AnnotationRevision] != attrs["revisions.app"] {
							return fmt.Errorf("the bridge's ConfigMap of app holds revision %s:\n%s", cm.Annotations[crsbridge.AnnotationRevision], cm.Data["manifests.yaml"])
						}
						return nil
					},
				),
			},
		},
	})
}

// expectGiven checks that the bridge's view of Cluster API's ClusterResourceSetBindings names
// cluster with both modules applied at the revisions the bridge holds: what the next plan lists.
func expectGiven(t *testing.T, f *testbed.Fleet, key records.Key, cluster string) {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	store := crsbridge.NewStore(mc)
	held, err := store.Read(context.Background(), key, f.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	// Cluster API patches the binding right after it creates the objects.
	deadline := time.Now().Add(30 * time.Second)
	for {
		given, err := store.Given(context.Background(), key, f.Namespace, held)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(given, func(j crsbridge.Joiner) bool { return j.Cluster == cluster })
		if i >= 0 && len(given[i].Modules) == 2 && given[i].Modules[0].Revision != "" && given[i].Modules[1].Revision != "" && given[i].Modules[0].Applied && given[i].Modules[1].Applied {
			t.Logf("the next plan lists %s: %s", cluster, given[i])
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClusterResourceSetBindings say %v, want %s with base and app applied at %v", given, cluster, held.Revisions)
		}
		time.Sleep(time.Second)
	}
}

// takeoverManager is the field manager that holds a module's objects once an apply took a
// joiner over: through Flux kustomize-controller's, delivering directly the module's own.
func takeoverManager(f *testbed.Fleet, name string, flux bool) func(module string) string {
	if flux {
		return func(string) string { return fluxdelivery.ControllerFieldManager }
	}
	return func(module string) string {
		return records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + "." + module}.FieldManager()
	}
}

// expectTakenOver checks that the apply took cluster over: the same objects (UIDs), each
// managed by the field manager the engine applies its module with (manager), and a binding of
// each module.
func expectTakenOver(f *testbed.Fleet, cluster, ns string, uids map[string]types.UID, key records.Key, manager func(module string) string) error {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return err
	}
	modules := map[string]string{"base": "base", "app": "app"}
	for obj, module := range modules {
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: obj}, cm); err != nil {
			return err
		}
		if cm.UID != uids[obj] {
			return fmt.Errorf("%s/%s was re-created (uid %s, the bridge made %s)", ns, obj, cm.UID, uids[obj])
		}
		want := manager(module)
		if !slices.ContainsFunc(cm.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == want }) {
			var managers []string
			for _, e := range cm.ManagedFields {
				managers = append(managers, e.Manager+"("+string(e.Operation)+")")
			}
			mc, _ := f.ManagementClient()
			bindings, _ := records.NewBindingStore(mc, "").List(context.Background(), key)
			return fmt.Errorf("%s/%s is not managed by %s after the apply: managers %v; bindings %v", ns, obj, want, managers, bindings)
		}
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	bindings, err := records.NewBindingStore(mc, "").List(context.Background(), key)
	if err != nil {
		return err
	}
	if len(bindings[cluster]) != 2 {
		return fmt.Errorf("%s has bindings %v after the apply, want base and app", cluster, bindings[cluster])
	}
	return nil
}

// TestAccCAPIBridge_planListsJoiner drives the CLI as a user would and reads the plan's text: a
// cluster that joins before its control plane is reachable is listed as waiting; once it is,
// Cluster API applies the bridge, and the next plan lists what it got from which bridge; after
// the apply that takes it over, the plan lists no joiner; one that stops matching before an apply
// took it over is listed as having left; removing follow_joins removes the bridge.
func TestAccCAPIBridge_planListsJoiner(t *testing.T) {
	name := acctest.UniqueLabel("bridgeplan")
	testPlanListsJoiner(t, acctest.CAPIBridgeFleet(t, name), name, false)
}

// TestAccCAPIBridge_fluxPlanListsJoiner is TestAccCAPIBridge_planListsJoiner for an assignment
// that delivers through Flux: the plan lists the joiner and what it got, says its health is not
// read (the runner reaches no workload cluster), and after the apply that takes it over (its
// Kustomizations pinned, its objects kustomize-controller's) lists it no more.
func TestAccCAPIBridge_fluxPlanListsJoiner(t *testing.T) {
	name := acctest.UniqueLabel("fluxbridgeplan")
	testPlanListsJoiner(t, acctest.CAPIFluxBridgeFleet(t, name), name, true)
}

func testPlanListsJoiner(t *testing.T, f *testbed.Fleet, name string, flux bool) {
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	base := module{name: "base", version: "1.0.0", manifests: configMaps(name, "v1", "base")}
	app := module{name: "app", version: "1.0.0", dependsOn: []string{"base"},
		manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  setting: v1\n", name)}
	engine := ""
	if flux {
		engine = fmt.Sprintf("delivery = { flux = { repository = %q, insecure = true } }\n  ", f.Flux.RegistryURL("gradual/"+name))
	}
	follow := engine + fmt.Sprintf(`follow_joins = { labels = { %q = %q } }`, clusterv1.WatchLabel, testbed.ClusterAPIWatchFilter)
	config := acctest.DevOverridesConfig(f) + assignmentConfig(f, "test", name, name, follow, base, app)
	if err := os.WriteFile(work+"/main.tf", []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	t.Cleanup(func() { acctest.RunCLI(context.Background(), t, cli, work, rc, "destroy", "-auto-approve") })

	if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: "late-1", Labels: map[string]string{name: "yes"}, Ready: false, ClusterAPI: true}); err != nil {
		t.Fatal(err)
	}
	acctest.AwaitPlan(ctx, t, cli, work, rc, "late-1: nothing yet: Cluster API waits for its control plane")

	ready := time.Now()
	if err := f.SetReady(ctx, "late-1", true); err != nil {
		t.Fatal(err)
	}
	uids := acctest.AwaitBridged(t, f, "late-1", name, []string{"base", "app"}, time.Minute)
	t.Logf("late-1: both modules there %s after its control plane was marked ready", time.Since(ready).Round(100*time.Millisecond))
	out := acctest.AwaitPlan(ctx, t, cli, work, rc, "late-1: base ")
	for _, want := range []string{"Bridge For Joiners", "hands joiners: app ", "Joined since the last apply, given by the bridge"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q:\n%s", want, acctest.Tail(out, 60))
		}
	}
	// The plan reads what the bridge gave the joiner as a verify would (ConfigMaps: ready once
	// they exist). Through Flux it reads no workload cluster, and says so.
	health := `healthy`
	if flux {
		health = `health not read: delivery through Flux reads no workload cluster`
	}
	if !regexp.MustCompile(`late-1: base \S+, app \S+; ` + health).MatchString(out) {
		t.Errorf("the plan does not say late-1 got both modules and %q:\n%s", health, acctest.Tail(out, 60))
	}
	t.Logf("the plan after the join:\n%s", acctest.Tail(out, 40))
	_, took := acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	t.Logf("the apply that took late-1 over took %s", took.Round(100*time.Millisecond))
	key := records.Key{Kind: records.KindAssignment, Namespace: f.Namespace, Name: name}
	if err := expectTakenOver(f, "late-1", name, uids, key, takeoverManager(f, name, flux)); err != nil {
		t.Error(err)
	}
	out, _ = acctest.RunCLI(ctx, t, cli, work, rc, "plan")
	if strings.Contains(out, "late-1:") {
		t.Errorf("the plan after the takeover still lists late-1 as a joiner:\n%s", acctest.Tail(out, 40))
	}

	// A joiner that stops matching before an apply took it over is shown as having left.
	if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: "late-2", Labels: map[string]string{name: "yes"}, Ready: true, ClusterAPI: true}); err != nil {
		t.Fatal(err)
	}
	acctest.AwaitBridged(t, f, "late-2", name, []string{"base", "app"}, time.Minute)
	if err := f.SetLabels(ctx, "late-2", map[string]string{}); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	out = acctest.AwaitPlan(ctx, t, cli, work, rc, "Left before an apply took them over")
	t.Logf("the plan lists late-2 as left %s after its label went", time.Since(left).Round(100*time.Millisecond))
	if !strings.Contains(out, "late-2: base ") {
		t.Errorf("the plan does not name late-2 as left with what it got:\n%s", acctest.Tail(out, 40))
	}

	// follow_joins turned off: the apply removes the bridge.
	off := acctest.DevOverridesConfig(f) + assignmentConfig(f, "test", name, name, engine, base, app)
	if err := os.WriteFile(work+"/main.tf", []byte(off), 0o644); err != nil {
		t.Fatal(err)
	}
	_, took = acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	t.Logf("the apply that turned follow_joins off took %s", took.Round(100*time.Millisecond))
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	held, err := crsbridge.NewStore(mc).Read(ctx, key, f.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if held.Exists || len(held.Revisions) > 0 {
		t.Errorf("follow_joins removed, the bridge is still there: %+v", held)
	}
}
