package rollout_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

func TestMain(m *testing.M) { acctest.Main(m) }

// app is a bundle: a namespace, a ConfigMap and a Deployment that kwok really rolls out.
// broken makes the Deployment unschedulable, so it can never become available; extra adds a
// ConfigMap only that revision has.
func app(ns, setting string, broken bool, extra string) string {
	nodeSelector := ""
	if broken {
		nodeSelector = "      nodeSelector: {gradual.dev/no-such-node: \"true\"}\n"
	}
	out := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  setting: %[2]q
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: 2
  progressDeadlineSeconds: 10
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
%[3]s      containers:
        - name: web
          image: registry.example/web:%[2]s
`, ns, setting, nodeSelector)
	if extra != "" {
		out += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata: {a: b}\n", extra, ns)
	}
	return out
}

func revisionOf(t *testing.T, manifests string) string {
	t.Helper()
	rev, err := manifest.Revision(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// fluxRevisionOf is the revision of manifests delivered through Flux from repository (insecure):
// where the artifact is is part of the revision (fluxdelivery.Settings.RevisionSettings).
func fluxRevisionOf(t *testing.T, manifests, repository string) string {
	t.Helper()
	set, err := manifest.Parse(manifests)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := set.RevisionWith(fluxdelivery.Settings{Repository: repository, Insecure: true}.RevisionSettings())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// rolloutConfig renders a gradual_rollout; targets is either `clusters = [...]` or `selector = {...}`.
func rolloutConfig(f *testbed.Fleet, name, targets, manifests, extra string) string {
	return acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "test" {
  name      = %q
  namespace = %q
  %s
  manifests = <<-EOT
%s  EOT
  verify = { timeout = "90s" }
  %s
}
`, name, f.Namespace, targets, indent(manifests), extra)
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

const allThree = `clusters = ["prod-eu-1", "prod-us-1", "staging-eu-1"]`

// stateCheck checks that cluster is in state on revision, both as the rollout `name` reports it
// (`attention` names every cluster that is not current on the rollout's revision; `summary`
// counts it) and as the cluster's own records say.
func stateCheck(f *testbed.Fleet, name, cluster, state, revision string) statecheck.StateCheck {
	return clusterStateCheck{f: f, rollout: name, cluster: cluster, state: state, revision: revision}
}

type clusterStateCheck struct {
	f                                 *testbed.Fleet
	rollout, cluster, state, revision string
}

func (c clusterStateCheck) CheckState(ctx context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	values := rolloutStateValues(req.State)
	if values == nil {
		resp.Error = fmt.Errorf("no gradual_rollout.test in the state")
		return
	}
	attention, _ := values["attention"].(map[string]any)
	note, listed := attention[c.cluster].(string)
	switch {
	case c.state == "current" && listed:
		resp.Error = fmt.Errorf("cluster %s: want current, attention says %q", c.cluster, note)
	case c.state == "current" && values["revision"] != c.revision:
		resp.Error = fmt.Errorf("cluster %s: want current on %s, the rollout's revision is %v", c.cluster, c.revision, values["revision"])
	case c.state != "current" && !strings.HasPrefix(note, c.state+":"):
		resp.Error = fmt.Errorf("cluster %s: want %s, attention says %q", c.cluster, c.state, note)
	}
	if resp.Error != nil {
		return
	}
	summary, _ := values["summary"].(map[string]any)
	if n, _ := strconv.ParseFloat(fmt.Sprint(summary[c.state]), 64); n < 1 {
		resp.Error = fmt.Errorf("summary %v counts no %s cluster", summary, c.state)
		return
	}
	wc, err := c.f.WorkloadClient(c.cluster)
	if err != nil {
		resp.Error = err
		return
	}
	recs, err := records.NewWorkloadStore(wc, records.DefaultNamespace).Load(ctx, records.Key{Kind: "rollout", Namespace: c.f.Namespace, Name: c.rollout})
	if err != nil {
		resp.Error = err
		return
	}
	current := ""
	if recs.Current != nil {
		current = recs.Current.Revision
	}
	if current != c.revision {
		resp.Error = fmt.Errorf("cluster %s: its records say it runs %q, want %q", c.cluster, current, c.revision)
	}
}

// attentionBefore checks that the plan's prior (refreshed) state of gradual_rollout.test has an
// `attention` entry for cluster containing every string of want.
type attentionBefore struct {
	cluster string
	want    []string
}

func (a attentionBefore) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != "gradual_rollout.test" || rc.Change == nil {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		attention, _ := before["attention"].(map[string]any)
		note, _ := attention[a.cluster].(string)
		for _, w := range a.want {
			if !strings.Contains(note, w) {
				resp.Error = fmt.Errorf("attention for %s before the plan is %q, want it to contain %q (attention: %v)", a.cluster, note, w, attention)
				return
			}
		}
		return
	}
	resp.Error = fmt.Errorf("the plan has no change to gradual_rollout.test")
}

// rolloutStateValues returns the attribute values of gradual_rollout.test in state, or nil.
func rolloutStateValues(state *tfjson.State) map[string]any {
	if state == nil || state.Values == nil || state.Values.RootModule == nil {
		return nil
	}
	for _, r := range state.Values.RootModule.Resources {
		if r.Address == "gradual_rollout.test" {
			return r.AttributeValues
		}
	}
	return nil
}

// Three clusters with update_limit = 1: one cluster at a time, all end on the revision; import
// (command and block);
// an update keeps the old revision as backup; destroy deletes what was applied.
func TestAccRollout_oneClusterAtATime(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("waves")
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev1, rev2 := revisionOf(t, v1), revisionOf(t, v2)
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, clusters, name) },
		Steps: []resource.TestStep{
			{
				Config: rolloutConfig(f, name, allThree, v1, `update_limit = "1"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("revision"), knownvalue.StringExact(rev1)),
					// A create has no refreshed state to plan from: the waves are known after
					// apply (a warning shows them as the fleet reads at plan time).
					plancheck.ExpectUnknownValue("gradual_rollout.test", tfjsonpath.New("waves")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("3 waves of 1 cluster")),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("summary"), knownvalue.MapExact(map[string]knownvalue.Check{
						"current": knownvalue.Int64Exact(3),
					})),
					stateCheck(f, name, "prod-eu-1", "current", rev1), stateCheck(f, name, "prod-us-1", "current", rev1), stateCheck(f, name, "staging-eu-1", "current", rev1),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("backup_revision"), knownvalue.StringExact("")),
				},
				Check: func(*terraform.State) error {
					if err := expectOneAtATime(f, name, clusters); err != nil {
						return err
					}
					if err := expectEvents(f, name, "Normal/RolloutSucceeded", "Normal/WaveDone", "Normal/WaveDone", "Normal/WaveDone",
						"Normal/WaveStarted", "Normal/WaveStarted", "Normal/WaveStarted"); err != nil {
						return err
					}
					return expectDeployment(f, clusters, name, "v1", true)
				},
			},
			{
				ResourceName:                         "gradual_rollout.test",
				ImportState:                          true,
				ImportStateId:                        f.Namespace + "/" + name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				ImportStateVerifyIgnore:              []string{"timeouts", "waves"},
			},
			{
				// The same through an `import` block: the imported rollout plans no change.
				Config:          rolloutConfig(f, name, allThree, v1, `update_limit = "1"`),
				ResourceName:    "gradual_rollout.test",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
				ImportStateId:   f.Namespace + "/" + name,
			},
			{
				Config: rolloutConfig(f, name, allThree, v2, `update_limit = "2"`),
				ConfigStateChecks: []statecheck.StateCheck{
					stateCheck(f, name, "prod-eu-1", "current", rev2), stateCheck(f, name, "staging-eu-1", "current", rev2),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("backup_revision"), knownvalue.StringExact(rev1)),
				},
				Check: func(*terraform.State) error { return expectDeployment(f, clusters, name, "v2", true) },
			},
		},
	})
}

// A revision that never becomes ready fails verification on the first cluster, which is restored
// to its backup; the revision is recorded invalid; other clusters are untouched; the next plan
// refuses it; a fixed revision goes out to every cluster.
func TestAccRollout_badRevisionRestoredAndRefused(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("bad")
	prod := []string{"prod-eu-1", "prod-us-1"}
	good, bad, fixed := app(name, "v1", false, ""), app(name, "v2", true, "only-in-v2"), app(name, "v3", false, "only-in-v2")
	rev1, rev2, rev3 := revisionOf(t, good), revisionOf(t, bad), revisionOf(t, fixed)
	targets := `selector = { match_labels = { env = "prod" } }`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, targets, good, `update_limit = "1"`)},
			{
				Config: rolloutConfig(f, name, targets, bad, `update_limit = "1"`),
				// terraform-plugin-testing runs no Check on a step that expects an error: what the
				// failed apply left is checked by the next step's PreConfig, before it plans.
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*prod-eu-1.*Deployment`),
			},
			{
				// The first cluster is back on v1 (the v2-only ConfigMap deleted); the second never
				// saw v2; the ledger holds v2 with its reason.
				PreConfig: func() {
					if err := expectDeployment(f, prod, name, "v1", true); err != nil {
						t.Fatal(err)
					}
					if err := expectConfigMap(f, "prod-eu-1", name, "only-in-v2", false); err != nil {
						t.Fatal(err)
					}
					ledger := ledgerOf(t, f, name)
					if len(ledger) != 1 || ledger[0].Revision != rev2 || strings.Join(ledger[0].Clusters, ",") != "prod-eu-1" {
						t.Fatalf("ledger = %+v, want %s failed on prod-eu-1", ledger, rev2)
					}
				},
				Config:      rolloutConfig(f, name, targets, bad, `update_limit = "1"`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*prod-eu-1.*retry_invalid`),
			},
			{
				Config: rolloutConfig(f, name, targets, fixed, `update_limit = "1"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					// The plan shows what apply does (the waves); where each cluster ends up is
					// known after apply.
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("2 waves of 1 cluster")),
					plancheck.ExpectUnknownValue("gradual_rollout.test", tfjsonpath.New("summary")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					stateCheck(f, name, "prod-eu-1", "current", rev3), stateCheck(f, name, "prod-us-1", "current", rev3),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("backup_revision"), knownvalue.StringExact(rev1)),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("invalid_revisions").AtSliceIndex(0).AtMapKey("revision"), knownvalue.StringExact(rev2)),
				},
			},
		},
	})
}

// Drift: an applied object deleted in one cluster and edited in another shows in the plan, and
// apply repairs it.
func TestAccRollout_drift(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("drift")
	v1 := app(name, "v1", false, "")
	rev1 := revisionOf(t, v1)
	targets := `selector = { match_labels = { env = "prod" } }`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, targets, v1, `update_limit = "2"`)},
			{
				PreConfig: func() {
					ctx := context.Background()
					c := workloadClient(t, f, "prod-eu-1")
					if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: name}}); err != nil {
						t.Fatal(err)
					}
					c = workloadClient(t, f, "prod-us-1")
					var cm corev1.ConfigMap
					if err := c.Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
						t.Fatal(err)
					}
					cm.Data["setting"] = "edited by hand"
					if err := c.Update(ctx, &cm); err != nil {
						t.Fatal(err)
					}
				},
				Config:             rolloutConfig(f, name, targets, v1, `update_limit = "2"`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				RefreshState:       false,
			},
			{
				// The status data source, read at plan time (no depends_on), sees the drift the
				// apply then repairs.
				Config: rolloutConfig(f, name, targets, v1, `update_limit = "2"`) + fmt.Sprintf(`
data "gradual_rollout_status" "test" {
  namespace = %q
  name      = %q
}
`, f.Namespace, name),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					// The refreshed state names the drifted clusters, their objects and fields.
					attentionBefore{cluster: "prod-eu-1", want: []string{"drifted: ", "ConfigMap", name + "/settings", "missing"}},
					attentionBefore{cluster: "prod-us-1", want: []string{"drifted: ", "ConfigMap", name + "/settings", ".data.setting"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					stateCheck(f, name, "prod-eu-1", "current", rev1), stateCheck(f, name, "prod-us-1", "current", rev1),
					statecheck.ExpectKnownValue("data.gradual_rollout_status.test", tfjsonpath.New("clusters"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"name": knownvalue.StringExact("prod-eu-1"), "state": knownvalue.StringExact("drifted"),
							"revision": knownvalue.StringExact(rev1), "drift": knownvalue.ListSizeExact(1),
						}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"name": knownvalue.StringExact("prod-us-1"), "state": knownvalue.StringExact("drifted"),
							"revision": knownvalue.StringExact(rev1), "drift": knownvalue.ListSizeExact(1),
						}),
					})),
					statecheck.ExpectKnownValue("data.gradual_rollout_status.test", tfjsonpath.New("summary"), knownvalue.MapExact(map[string]knownvalue.Check{
						"drifted": knownvalue.Int64Exact(2),
					})),
				},
				Check: func(*terraform.State) error {
					for _, cluster := range []string{"prod-eu-1", "prod-us-1"} {
						var cm corev1.ConfigMap
						if err := workloadClient(t, f, cluster).Get(context.Background(), client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
							return fmt.Errorf("%s: %w", cluster, err)
						}
						if cm.Data["setting"] != "v1" {
							return fmt.Errorf("%s: setting = %q, want v1 (repaired)", cluster, cm.Data["setting"])
						}
					}
					return nil
				},
			},
		},
	})
}

// A cluster that gains the label joins; a not-ready cluster is skipped with its reason and joins
// once ready.
func TestAccRollout_joinAndSkip(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("join")
	label := name // a label key only this test uses
	v1 := app(name, "v1", false, "")
	rev1 := revisionOf(t, v1)
	relabel := labeller(t, f, label)
	relabel("prod-eu-1", true)
	t.Cleanup(func() {
		relabel("prod-eu-1", false)
		relabel("prod-us-1", false)
		_ = f.SetReady(context.Background(), "prod-us-1", true)
	})
	targets := fmt.Sprintf(`selector = { match_labels = { %q = "yes" } }`, label)
	config := rolloutConfig(f, name, targets, v1, `update_limit = "50%"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{stateCheck(f, name, "prod-eu-1", "current", rev1)},
			},
			{
				// prod-us-1 gains the label but its control plane is down: skipped, with the reason.
				PreConfig: func() {
					relabel("prod-us-1", true)
					if err := f.SetReady(context.Background(), "prod-us-1", false); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("skipped").AtMapKey("prod-us-1"),
						knownvalue.StringRegexp(regexp.MustCompile(`not (provisioned|initialized)`))),
				},
			},
			{
				// Ready again: the plan shows it joining and apply adds it.
				PreConfig: func() {
					if err := f.SetReady(context.Background(), "prod-us-1", true); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
					plancheck.ExpectUnknownValue("gradual_rollout.test", tfjsonpath.New("summary")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					stateCheck(f, name, "prod-eu-1", "current", rev1), stateCheck(f, name, "prod-us-1", "current", rev1),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("skipped"), knownvalue.MapSizeExact(0)),
				},
			},
		},
	})
}

// Destroy with deletion_policy = "orphan" leaves the objects and removes the records.
func TestAccRollout_orphan(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("orphan")
	v1 := app(name, "v1", false, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", false); err != nil {
				return fmt.Errorf("orphaned objects should stay: %w", err)
			}
			state := workloadRecords(t, f, "staging-eu-1", name)
			if state.Current != nil || state.Backup != nil {
				return fmt.Errorf("records left after destroy: %+v", state)
			}
			return nil
		},
		Steps: []resource.TestStep{{Config: rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, v1, `deletion_policy = "orphan"`)}},
	})
}

// A second apply while one holds the Lease fails naming the holder once it sees the Lease
// renewed; a Lease left by a killed process (never renewed while watched, whatever its times
// say) is taken over after the Lease's duration.
func TestAccRollout_lease(t *testing.T) {
	acctest.OnOneLane(t, 0)
	testLease(t, directEngine)
}

// TestAccRollout_fluxContract_lease: the same through Flux (the Lease is in the management
// cluster on both engines).
func TestAccRollout_fluxContract_lease(t *testing.T) {
	acctest.OnOneLane(t, 1) // the Lease between two applies; the direct test runs on the other lane
	testLease(t, fluxEngine)
}

func testLease(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("lease")
	v1 := app(name, "v1", false, "")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	config := rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, v1, e.withDelivery(f, name, ""))
	renewing, cancelRenewing := context.WithCancel(context.Background())
	var renewer sync.WaitGroup
	stopRenewing := func() { cancelRenewing(); renewer.Wait() }
	var planted time.Time
	t.Cleanup(stopRenewing)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Another apply is running: it renews its Lease every second.
				PreConfig: func() {
					renewer.Go(func() {
						for renewing.Err() == nil {
							if err := writeLease(f, key, "other-apply/pid-42", time.Now(), 60); err != nil {
								t.Errorf("renew the planted Lease: %v", err)
							}
							select {
							case <-renewing.Done():
							case <-time.After(time.Second):
							}
						}
					})
				},
				Config:      config,
				ExpectError: regexp.MustCompile(`(?s)Rollout Already Running.*other-apply/pid-42`),
			},
			{
				// That process was killed an hour ago: its Lease goes unrenewed for its duration
				// (15 s here, to keep the test short) while the apply watches, and is taken over.
				PreConfig: func() {
					stopRenewing()
					// The refused apply delivered nothing.
					if err := expectConfigMap(f, "staging-eu-1", name, "settings", false); err != nil {
						t.Fatalf("the apply refused for the Lease: %v", err)
					}
					time.Sleep(2 * time.Second) // the renewer's last write
					plantLease(t, f, key, "killed-apply/pid-7", time.Now().Add(-time.Hour), 15)
					planted = time.Now()
				},
				Config: config,
				Check: func(*terraform.State) error {
					if waited := time.Since(planted); waited < 15*time.Second {
						return fmt.Errorf("took the killed holder's Lease over after %s, before its 15 s duration", waited.Round(time.Second))
					}
					st, err := e.records(t, f, "staging-eu-1", records.DefaultNamespace, key)
					if err != nil {
						return err
					}
					if st.Provisioning != nil || st.Current == nil || st.Current.Revision != e.revision(t, f, name, v1) {
						return fmt.Errorf("records %+v after the takeover, want current on v1", st)
					}
					return expectDeployment(f, []string{"staging-eu-1"}, name, "v1", true)
				},
			},
		},
	})
}

// plantLease writes the rollout's Lease as another process would have left it.
func plantLease(t *testing.T, f *testbed.Fleet, key records.Key, holder string, renewed time.Time, seconds int32) {
	t.Helper()
	if err := writeLease(f, key, holder, renewed, seconds); err != nil {
		t.Fatal(err)
	}
}

// writeLease writes the rollout's Lease as holder, renewed at renewed, lasting seconds.
func writeLease(f *testbed.Fleet, key records.Key, holder string, renewed time.Time, seconds int32) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: records.DefaultNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	at := metav1.NewMicroTime(renewed)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: records.DefaultNamespace, Name: key.ObjectName()}}
	err = mc.Get(ctx, client.ObjectKeyFromObject(lease), lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	lease.Annotations = map[string]string{records.AnnotationRolloutKey: key.String()}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, ptr(seconds)
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &at, &at
	if apierrors.IsNotFound(err) {
		return mc.Create(ctx, lease)
	}
	return mc.Update(ctx, lease)
}

// Bad input is refused at plan time with nothing applied.
func TestAccRollout_badInput(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("input")
	good := app(name, "v1", false, "")
	crdless := good + "---\napiVersion: example.gradual.dev/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: " + name + "\n"
	targets := `clusters = ["staging-eu-1"]`
	steps := []resource.TestStep{
		{Config: rolloutConfig(f, name, targets, good+"---\nkind: [oops\n", ""), ExpectError: regexp.MustCompile(`(?s)Invalid Manifests.*document 4`)},
		{Config: rolloutConfig(f, name, targets, good, `update_limit = "0"`), ExpectError: regexp.MustCompile(`Invalid Update Limit`)},
		{Config: rolloutConfig(f, name, targets, good, `update_limit = "150%"`), ExpectError: regexp.MustCompile(`Invalid Update Limit`)},
		{Config: rolloutConfig(f, name, targets, good, `update_limit = "abc"`), ExpectError: regexp.MustCompile(`Invalid Update Limit`)},
		{Config: rolloutConfig(f, name, targets, crdless, ""), ExpectError: regexp.MustCompile(`(?s)Widget.*example.gradual.dev`)},
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProviderFactories, Steps: steps})
	// Nothing was applied anywhere.
	var ns corev1.Namespace
	if err := workloadClient(t, f, "staging-eu-1").Get(context.Background(), client.ObjectKey{Name: name}, &ns); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s exists after refused plans (err %v)", name, err)
	}
}

// A bundle over 1 MiB (after compression) is applied, and its records are split across Secrets.
func TestAccRollout_largeBundle(t *testing.T) {
	acctest.OnOneLane(t, 0) // how records are split, not how a CLI drives the provider
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("large")
	bundle := app(name, "v1", false, "") + bigConfigMaps(name, 3, 450<<10)
	if len(bundle) < 1<<20 {
		t.Fatalf("bundle is only %d bytes", len(bundle))
	}
	rev := revisionOf(t, bundle)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config:            rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, bundle, ""),
			ConfigStateChecks: []statecheck.StateCheck{stateCheck(f, name, "staging-eu-1", "current", rev)},
			Check: func(*terraform.State) error {
				state := workloadRecords(t, f, "staging-eu-1", name)
				if state.Current == nil || state.Current.Revision != rev {
					return fmt.Errorf("current record %+v, want %s", state.Current, rev)
				}
				return expectConfigMap(f, "staging-eu-1", name, "big-2", true)
			},
		}},
	})
}

// bigConfigMaps returns n ConfigMaps of about size bytes each of incompressible (pseudo-random)
// data, so that the bundle stays large after compression.
func bigConfigMaps(ns string, n, size int) string {
	var b strings.Builder
	x := uint64(88172645463325252)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-%d\n  namespace: %s\ndata:\n  blob: \"", i, ns)
		for j := 0; j < size/16; j++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			fmt.Fprintf(&b, "%016x", x)
		}
		b.WriteString("\"\n")
	}
	return b.String()
}

// --- helpers reading the clusters directly ---

func workloadClient(t *testing.T, f *testbed.Fleet, cluster string) client.Client {
	t.Helper()
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func workloadRecords(t *testing.T, f *testbed.Fleet, cluster, name string) *records.State {
	t.Helper()
	state, err := records.NewWorkloadStore(workloadClient(t, f, cluster), records.DefaultNamespace).Load(context.Background(),
		records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func ledgerOf(t *testing.T, f *testbed.Fleet, name string) []records.InvalidEntry {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := records.NewManagementStore(mc, records.DefaultNamespace).Ledger(context.Background(),
		records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return ledger
}

// expectEvents checks the Events on the rollout's management record (type/reason, in any
// order): what `kubectl get events -w` shows of a run.
func expectEvents(f *testbed.Fleet, name string, want ...string) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	record := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}.ObjectName()
	var list corev1.EventList
	if err := mc.List(context.Background(), &list, client.InNamespace(records.DefaultNamespace)); err != nil {
		return err
	}
	var got []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "Secret" && ev.InvolvedObject.Name == record {
			got = append(got, ev.Type+"/"+ev.Reason)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("events on %s: %v, want %v", record, got, want)
	}
	return nil
}

// expectOneAtATime checks, from the times the progress record holds, that no two clusters were
// being changed at once.
func expectOneAtATime(f *testbed.Fleet, name string, clusters []string) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	p, err := records.NewManagementStore(mc, records.DefaultNamespace).LoadProgress(context.Background(),
		records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name})
	if err != nil || p == nil {
		return fmt.Errorf("progress record: %v (%v)", p, err)
	}
	type span struct {
		cluster    string
		start, end time.Time
	}
	var spans []span
	for _, c := range clusters {
		o, ok := p.Clusters[c]
		if !ok || o.StartedAt.IsZero() || o.FinishedAt.IsZero() {
			return fmt.Errorf("progress has no times for %s: %+v", c, p.Clusters)
		}
		spans = append(spans, span{c, o.StartedAt, o.FinishedAt})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			return fmt.Errorf("%s started at %s before %s finished at %s", spans[i].cluster, spans[i].start, spans[i-1].cluster, spans[i-1].end)
		}
	}
	return nil
}

func expectDeployment(f *testbed.Fleet, clusters []string, ns, version string, available bool) error {
	for _, cluster := range clusters {
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			return err
		}
		var d appsv1.Deployment
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+version) {
			return fmt.Errorf("%s: image %s, want version %s", cluster, img, version)
		}
		if available && d.Status.AvailableReplicas != 2 {
			return fmt.Errorf("%s: %d replicas available, want 2", cluster, d.Status.AvailableReplicas)
		}
	}
	return nil
}

func expectConfigMap(f *testbed.Fleet, cluster, ns, name string, exists bool) error {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return err
	}
	err = c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	switch {
	case exists && err != nil:
		return fmt.Errorf("%s: ConfigMap %s/%s: %w", cluster, ns, name, err)
	case !exists && !apierrors.IsNotFound(err):
		return fmt.Errorf("%s: ConfigMap %s/%s should be gone (err %v)", cluster, ns, name, err)
	}
	return nil
}

// expectGone checks that destroy removed the namespace's objects and the records.
func expectGone(f *testbed.Fleet, clusters []string, ns string) error {
	for _, cluster := range clusters {
		if err := expectConfigMap(f, cluster, ns, "settings", false); err != nil {
			return err
		}
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			return err
		}
		var list corev1.SecretList
		if err := c.List(context.Background(), &list, client.InNamespace(records.DefaultNamespace), client.MatchingLabels{records.LabelManagedBy: records.ManagedBy}); err != nil {
			return err
		}
		for _, s := range list.Items {
			if strings.Contains(s.Name, ns) {
				return fmt.Errorf("%s: record %s left after destroy", cluster, s.Name)
			}
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// A Create that fails after some clusters succeeded saves no state, so Terraform has nothing to
// taint and replace: the next apply plans a create that continues from the records, and the
// cluster that succeeded keeps its objects throughout (no fleet-wide delete).
func TestAccRollout_failedCreateIsNotReplaced(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("create")
	// Schedulable only on prod-eu-1's nodes, which this test labels.
	zone := "gradual.dev/zone-" + name
	labelNodes(t, f, "prod-eu-1", zone, "a")
	partial := strings.Replace(app(name, "v1", false, ""), "    spec:\n      containers:", "    spec:\n      nodeSelector: {"+zone+": a}\n      containers:", 1)
	fixed := app(name, "v2", false, "")
	targets := `selector = { match_labels = { env = "prod" } }`
	extra := `canary = ["prod-eu-1"]
  on_failure = "halt"`
	var firstUID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      rolloutConfig(f, name, targets, partial, extra),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*prod-us-1`),
			},
			{
				PreConfig: func() {
					// prod-eu-1 kept the revision (halt), prod-us-1 was restored to nothing.
					if err := expectDeployment(f, []string{"prod-eu-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
					if err := expectConfigMap(f, "prod-us-1", name, "settings", false); err != nil {
						t.Fatal(err)
					}
					firstUID = deploymentUID(t, f, "prod-eu-1", name)
				},
				Config: rolloutConfig(f, name, targets, fixed, extra),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionCreate),
				}},
				Check: func(*terraform.State) error {
					if uid := deploymentUID(t, f, "prod-eu-1", name); uid != firstUID {
						return fmt.Errorf("prod-eu-1's Deployment was recreated (uid %s, was %s): the failed create led to a delete", uid, firstUID)
					}
					return expectDeployment(f, []string{"prod-eu-1", "prod-us-1"}, name, "v2", true)
				},
			},
		},
	})
}

func labelNodes(t *testing.T, f *testbed.Fleet, cluster, key, value string) {
	t.Helper()
	c := workloadClient(t, f, cluster)
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	set := func(on bool) error {
		for i := range nodes.Items {
			n := &nodes.Items[i]
			patch := client.MergeFrom(n.DeepCopy())
			if on {
				n.Labels[key] = value
			} else {
				delete(n.Labels, key)
			}
			if err := c.Patch(ctx, n, patch); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.List(ctx, &nodes); err == nil {
			_ = set(false)
		}
	})
}

func deploymentUID(t *testing.T, f *testbed.Fleet, cluster, ns string) string {
	t.Helper()
	var d appsv1.Deployment
	if err := workloadClient(t, f, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
		t.Fatal(err)
	}
	return string(d.UID)
}

// verify.http_checks run after the objects are ready, with {cluster} replaced. A gateway that
// answers 503 for longer than one check's own retries (35 s) is the path's failure, not the
// revision's: the check is tried again within verify.timeout and the revision goes through,
// nothing recorded invalid. A check the app itself answers wrong (500) fails the cluster like any
// verification.
func TestAccRollout_httpChecks(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("http")
	const outage = 35 * time.Second
	var calls, gatewayCalls atomic.Int32
	var outageStart atomic.Int64 // unix nanos of the first call to the gateway path
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.URL.Path {
		case "/healthz/staging-eu-1":
			w.WriteHeader(http.StatusOK)
		case "/gateway/staging-eu-1":
			gatewayCalls.Add(1)
			outageStart.CompareAndSwap(0, time.Now().UnixNano())
			if time.Since(time.Unix(0, outageStart.Load())) < outage {
				w.WriteHeader(http.StatusServiceUnavailable) // the ingress has no ready endpoint yet
				return
			}
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	checks := func(path string) string {
		return fmt.Sprintf(`verify = {
    timeout     = "90s"
    http_checks = [{ url = "%s%s", timeout = "2s" }]
  }`, srv.URL, path)
	}
	config := func(path, version string) string {
		return strings.Replace(rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, app(name, version, false, ""), checks(path)),
			"  verify = { timeout = \"90s\" }\n", "", 1)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("/healthz/{cluster}", "v1"),
				Check: func(*terraform.State) error {
					if calls.Load() == 0 {
						return fmt.Errorf("the HTTP check was never called")
					}
					return nil
				},
			},
			{
				Config: config("/gateway/{cluster}", "v2"),
				Check: func(*terraform.State) error {
					if gatewayCalls.Load() < 2 {
						return fmt.Errorf("the gateway was called %d times: the outage was never seen", gatewayCalls.Load())
					}
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v2", true); err != nil {
						return err
					}
					if ledger := ledgerOf(t, f, name); len(ledger) != 0 {
						return fmt.Errorf("ledger = %+v after a gateway outage, want nothing recorded invalid", ledger)
					}
					return nil
				},
			},
			{
				Config:      config("/broken/{cluster}", "v3"),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*http check.*got status 500, want 200`),
			},
		},
	})
}
