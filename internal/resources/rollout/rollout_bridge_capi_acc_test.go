package rollout_test

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
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// bridgeSettings is a revision made of ConfigMaps only: ready as soon as it exists, on any
// cluster Cluster API brings up.
func bridgeSettings(ns, setting string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\ndata:\n  setting: %[2]q\n", ns, setting)
}

// TestAccCAPIBridge_rolloutJoiner: a rollout with follow_joins on; a cluster that joins after
// the apply gets the revision from Cluster API's ClusterResourceSet controller with no Terraform
// run, and the bridge's reading of Cluster API's ClusterResourceSetBinding (what the next plan
// lists) names it; the next apply takes it over (its records, the rollout's field manager) with no
// object re-created; a revision recorded invalid never reaches a joiner (the bridge keeps the
// last verified); a revision the fleet verifies moves the bridge in the same apply; destroy
// removes the bridge.
func TestAccCAPIBridge_rolloutJoiner(t *testing.T) {
	name := acctest.UniqueLabel("rbridge")
	testRolloutJoiner(t, acctest.CAPIBridgeFleet(t, name), name, false)
}

// TestAccCAPIBridge_fluxRolloutJoiner is TestAccCAPIBridge_rolloutJoiner for a rollout that
// delivers through Flux, on a fleet with Flux's controllers beside Cluster API's: the same
// ClusterResourceSet bridges, and the apply that takes the joiner over pins its Kustomization
// (kustomize-controller's field manager, the records in the management cluster), none of the
// bridge's objects re-created.
func TestAccCAPIBridge_fluxRolloutJoiner(t *testing.T) {
	name := acctest.UniqueLabel("frbridge")
	testRolloutJoiner(t, acctest.CAPIFluxBridgeFleet(t, name), name, true)
}

func testRolloutJoiner(t *testing.T, f *testbed.Fleet, name string, flux bool) {
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	targets := fmt.Sprintf("selector = { match_labels = { %q = \"yes\" } }", name)
	follow := fmt.Sprintf(`follow_joins = { labels = { %q = %q } }`, clusterv1.WatchLabel, testbed.ClusterAPIWatchFilter)
	revisionOf := revisionOf
	if flux {
		repository := f.Flux.RegistryURL("gradual/" + name)
		follow += fmt.Sprintf("\n  delivery = { flux = { repository = %q, insecure = true } }", repository)
		revisionOf = func(t *testing.T, manifests string) string { return fluxRevisionOf(t, manifests, repository) }
	}
	v1 := bridgeSettings(name, "v1")
	config := rolloutConfig(f, name, targets, v1, follow)
	// v2's Deployment never becomes ready (its Pods fit no Node): recorded invalid.
	broken := rolloutConfig(f, name, targets, app(name, "v2", true, ""), follow)
	v3 := bridgeSettings(name, "v3")
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
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
			cm := client.ObjectKey{Namespace: f.Namespace, Name: crsbridge.ConfigMapName(key, delivery.BridgeModule)}
			if err := mc.Get(context.Background(), cm, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the bridge's ConfigMap is still there after destroy (%v)", err)
			}
			// Taken over as the rollout's own: deleted by destroy (adopted objects are given back).
			return expectConfigMap(f, "joiner-1", name, "settings", false)
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				Check:  bridgeHolds(mc, key, revisionOf(t, v1), "v1"),
			},
			{
				// A cluster joins; no Terraform runs until it has the revision.
				PreConfig: func() {
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: "joiner-1", Labels: map[string]string{name: "yes"}, Ready: true, ClusterAPI: true}); err != nil {
						t.Fatalf("join: %v", err)
					}
					up := time.Now()
					uids = acctest.AwaitBridged(t, f, "joiner-1", name, []string{"settings"}, time.Minute)
					bridged := time.Since(up)
					expectRolloutGiven(t, mc, key, "joiner-1", revisionOf(t, v1))
					t.Logf("joiner-1: control plane up %s after the join started; revision %s there %s after its control plane was up (no Terraform run)",
						up.Sub(t0).Round(100*time.Millisecond), revisionOf(t, v1), bridged.Round(100*time.Millisecond))
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("gradual_rollout.test", "summary.current", "2"),
					func(*terraform.State) error { return expectRolloutTakenOver(f, "joiner-1", name, uids, key, flux) },
				),
			},
			{
				// v2 fails and is recorded invalid: the bridge keeps v1.
				Config:      broken,
				ExpectError: regexp.MustCompile(`Rollout Failed`),
			},
			{
				// A cluster joining now gets v1 from the bridge, never the invalid v2; going back
				// to v1, the apply takes it over.
				PreConfig: func() {
					if len(ledgerOf(t, f, name)) == 0 {
						t.Fatal("v2 is not recorded invalid")
					}
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: "joiner-2", Labels: map[string]string{name: "yes"}, Ready: true, ClusterAPI: true}); err != nil {
						t.Fatalf("join: %v", err)
					}
					acctest.AwaitBridged(t, f, "joiner-2", name, []string{"settings"}, time.Minute)
					if err := expectSettingIs(f, "joiner-2", name, "v1"); err != nil {
						t.Fatalf("the bridge handed out a revision recorded invalid: %v", err)
					}
					if err := expectConfigMap(f, "joiner-2", name, "settings", true); err != nil {
						t.Fatal(err)
					}
					d := &unstructured.Unstructured{}
					d.SetAPIVersion("apps/v1")
					d.SetKind("Deployment")
					if err := workloadClient(t, f, "joiner-2").Get(context.Background(), client.ObjectKey{Namespace: name, Name: "web"}, d); !apierrors.IsNotFound(err) {
						t.Fatalf("joiner-2 holds v2's Deployment (%v): the bridge handed out a revision recorded invalid", err)
					}
				},
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("gradual_rollout.test", "summary.current", "3"),
					func(*terraform.State) error { return expectSettingIs(f, "joiner-2", name, "v1") },
				),
			},
			{
				// v3 is verified on the whole fleet: the bridge moves to it in the same apply.
				Config: rolloutConfig(f, name, targets, v3, follow),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("gradual_rollout.test", "bridge.revision", revisionOf(t, v3)),
					bridgeHolds(mc, key, revisionOf(t, v3), "v3"),
				),
			},
		},
	})
}

// bridgeHolds checks that the rollout's `bridge` and its ConfigMap hold revision, whose
// ConfigMap "settings" says setting.
func bridgeHolds(mc client.Client, key records.Key, revision, setting string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		if got := s.RootModule().Resources["gradual_rollout.test"].Primary.Attributes["bridge.revision"]; got != revision {
			return fmt.Errorf("bridge.revision = %q, want %q", got, revision)
		}
		cm := &corev1.ConfigMap{}
		if err := mc.Get(context.Background(), client.ObjectKey{Namespace: key.Namespace, Name: crsbridge.ConfigMapName(key, delivery.BridgeModule)}, cm); err != nil {
			return err
		}
		if !strings.Contains(cm.Data["manifests.yaml"], fmt.Sprintf("setting: %s", setting)) || cm.Annotations[crsbridge.AnnotationRevision] != revision {
			return fmt.Errorf("the bridge's ConfigMap holds revision %s:\n%s", cm.Annotations[crsbridge.AnnotationRevision], cm.Data["manifests.yaml"])
		}
		return nil
	}
}

// expectRolloutGiven checks that the bridge's view of Cluster API's ClusterResourceSetBindings
// names cluster with the revision applied: what the next plan lists.
func expectRolloutGiven(t *testing.T, mc client.Client, key records.Key, cluster, revision string) {
	t.Helper()
	store := crsbridge.NewStore(mc)
	held, err := store.Read(context.Background(), key, key.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	// Cluster API patches the binding right after it creates the objects.
	deadline := time.Now().Add(30 * time.Second)
	for {
		given, err := store.Given(context.Background(), key, key.Namespace, held)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(given, func(j crsbridge.Joiner) bool { return j.Cluster == cluster })
		if i >= 0 && len(given[i].Modules) == 1 && given[i].Modules[0].Revision == revision && given[i].Modules[0].Applied {
			t.Logf("the next plan lists %s: %s", cluster, given[i])
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClusterResourceSetBindings say %v, want %s given revision %s", given, cluster, revision)
		}
		time.Sleep(time.Second)
	}
}

// expectRolloutTakenOver checks that the apply took cluster over: the same objects (UIDs),
// managed by the engine's field manager (the rollout's; through Flux, kustomize-controller's),
// and the rollout's records of the cluster (in it; through Flux, in the management cluster).
func expectRolloutTakenOver(f *testbed.Fleet, cluster, ns string, uids map[string]types.UID, key records.Key, flux bool) error {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return err
	}
	manager, recordsIn, recordKey := key.FieldManager(), c, key
	if flux {
		mc, err := f.ManagementClient()
		if err != nil {
			return err
		}
		manager, recordsIn, recordKey = fluxdelivery.ControllerFieldManager, mc, delivery.FluxRecordKey(key, cluster)
	}
	for obj, uid := range uids {
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: obj}, cm); err != nil {
			return err
		}
		if cm.UID != uid {
			return fmt.Errorf("%s/%s was re-created (uid %s, the bridge made %s)", ns, obj, cm.UID, uid)
		}
		if !slices.ContainsFunc(cm.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == manager }) {
			return fmt.Errorf("%s/%s is not managed by %s after the apply", ns, obj, manager)
		}
	}
	state, err := records.NewWorkloadStore(recordsIn, records.DefaultNamespace).Load(context.Background(), recordKey)
	if err != nil {
		return err
	}
	if state == nil || state.Current == nil {
		return fmt.Errorf("%s holds no record of the rollout after the apply", cluster)
	}
	return nil
}

// expectSettingIs checks ConfigMap settings' setting on cluster.
func expectSettingIs(f *testbed.Fleet, cluster, ns, want string) error {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	if got := cm.Data["setting"]; got != want {
		return fmt.Errorf("%s: setting %q, want %q", cluster, got, want)
	}
	return nil
}

// TestAccCAPIBridge_rolloutPlanListsJoiner drives the CLI as a user would and reads the plan's
// text: a cluster that joins before its control plane is reachable is listed as waiting; once it
// is, Cluster API applies the bridge, and the next plan lists the revision it got and its health;
// after the apply that takes it over, the plan lists no joiner; removing follow_joins removes
// the bridge.
func TestAccCAPIBridge_rolloutPlanListsJoiner(t *testing.T) {
	name := acctest.UniqueLabel("rbridgeplan")
	f := acctest.CAPIBridgeFleet(t, name)
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	targets := fmt.Sprintf("selector = { match_labels = { %q = \"yes\" } }", name)
	follow := fmt.Sprintf(`follow_joins = { labels = { %q = %q } }`, clusterv1.WatchLabel, testbed.ClusterAPIWatchFilter)
	v1 := bridgeSettings(name, "v1")
	cliConfig := func(extra string) string {
		return strings.Replace(rolloutConfig(f, name, targets, v1, extra), acctest.ProviderConfig(f), acctest.DevOverridesConfig(f), 1)
	}
	if err := os.WriteFile(work+"/main.tf", []byte(cliConfig(follow)), 0o644); err != nil {
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
	acctest.AwaitBridged(t, f, "late-1", name, []string{"settings"}, time.Minute)
	t.Logf("late-1: revision there %s after its control plane was marked ready (no Terraform run)", time.Since(ready).Round(100*time.Millisecond))
	out := acctest.AwaitPlan(ctx, t, cli, work, rc, "late-1: revision ")
	for _, want := range []string{"Bridge For Joiners", "hands joiners: revision " + revisionOf(t, v1), "Joined since the last apply"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q:\n%s", want, acctest.Tail(out, 60))
		}
	}
	if !regexp.MustCompile(`late-1: revision ` + revisionOf(t, v1) + `; healthy`).MatchString(out) {
		t.Errorf("the plan does not say late-1 got the revision and is healthy:\n%s", acctest.Tail(out, 60))
	}
	t.Logf("the plan after the join:\n%s", acctest.Tail(out, 30))
	_, took := acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	t.Logf("the apply that took late-1 over took %s", took.Round(100*time.Millisecond))
	out, _ = acctest.RunCLI(ctx, t, cli, work, rc, "plan")
	if strings.Contains(out, "late-1:") {
		t.Errorf("the plan after the takeover still lists late-1 as a joiner:\n%s", acctest.Tail(out, 40))
	}

	// follow_joins turned off: the apply removes the bridge.
	if err := os.WriteFile(work+"/main.tf", []byte(cliConfig("")), 0o644); err != nil {
		t.Fatal(err)
	}
	acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	held, err := crsbridge.NewStore(mc).Read(ctx, key, f.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if held.Exists || len(held.Revisions) > 0 {
		t.Errorf("follow_joins removed, the bridge is still there: %+v", held)
	}
}
