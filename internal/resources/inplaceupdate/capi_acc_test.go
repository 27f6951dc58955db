package inplaceupdate_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// clusterAPIEnv opts in to the tests against the real Cluster API controllers (tools/testacc.sh
// sets it in its Cluster API step, which builds the controllers first).
const clusterAPIEnv = "GRADUAL_TEST_CLUSTER_API"

// capiLock is held while this binary runs Cluster API controllers: CAPD binds fixed ports, so
// one such fleet runs on a machine at a time.
const capiLock = "/tmp/gradual-capi.lock"

const (
	extensionName = "test-extension"
	memCluster    = "mem-1"
	workers       = memCluster + "-md-0"
)

// fleetClusters are three more in-memory clusters, labelled fleetLabel, for the fleet tests.
var fleetClusters = []string{"mem-2", "mem-3", "mem-4"}

// The lanes (acctest.OnOneLane) of the tests that use fleetClusters and cpCluster: the shared
// fleet provisions each only where its tests run.
const (
	fleetLane        = 0
	controlPlaneLane = 1
)

const fleetLabel = "gradual.dev/fleet-test"

func TestMain(m *testing.M) {
	code := m.Run()
	capi.stop()
	os.Exit(code)
}

// capi is the one fleet with the real Cluster API controllers that the tests of this package
// share, with one in-memory cluster provisioned by CAPI (a one-replica control plane and a
// one-replica MachineDeployment rolled out with maxSurge 0 / maxUnavailable 1, so a covered
// change is done in place) and CAPI's test extension registered; the fleet tests' clusters
// (fleetClusters) and cpCluster (a three-replica control plane) beside it.
var capi capiShared

type capiShared struct {
	mu      sync.Mutex
	started bool
	fleet   *testbed.Fleet
	lock    *os.File
	err     error
}

// stop takes the shared fleet down (if it runs) and releases the lock; the next capiFleet
// starts it again (a test that needs a fleet of its own stops this one first).
func (c *capiShared) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	stopCAPIFleet(c.fleet, c.lock)
	c.started, c.fleet, c.lock, c.err = false, nil, nil, nil
}

func stopCAPIFleet(f *testbed.Fleet, lock *os.File) {
	if f != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		f.SetLogf(func(format string, args ...any) { fmt.Fprintf(os.Stderr, "capi fleet: "+format+"\n", args...) })
		if err := f.Down(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the Cluster API fleet: %v\n", err)
		}
	}
	if lock != nil {
		_ = lock.Close()
	}
}

// lockCAPI takes capiLock (blocking while another process runs a Cluster API fleet).
func lockCAPI() (*os.File, error) {
	lock, err := os.OpenFile(capiLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return lock, nil
}

// capiToolchain skips the test unless acceptance tests and the Cluster API step are enabled and
// the controllers are built.
func capiToolchain(t *testing.T) testbed.Toolchain {
	t.Helper()
	acctest.PreCheck(t)
	if os.Getenv(clusterAPIEnv) != "1" {
		t.Skipf("set %s=1 to run against the real Cluster API controllers (tools/testacc.sh does, after `tools/toolchain.sh cluster-api`)", clusterAPIEnv)
	}
	tc, err := testbed.ToolchainFromEnv()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	if !tc.HasClusterAPI() {
		t.Skip("skipping: Cluster API binaries missing; build them with `tools/toolchain.sh cluster-api`")
	}
	return tc
}

// capiFleet starts the shared fleet on first use; tests skip unless acceptance tests and the
// Cluster API step are enabled and the controllers are built.
func capiFleet(t *testing.T) (*testbed.Fleet, client.Client) {
	t.Helper()
	tc := capiToolchain(t)
	capi.mu.Lock()
	defer capi.mu.Unlock()
	if !capi.started {
		capi.started = true
		t0 := time.Now()
		func() {
			if capi.lock, capi.err = lockCAPI(); capi.err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			if capi.fleet, capi.err = testbed.Up(ctx, tc, testbed.Options{ClusterAPI: true, Logf: t.Logf}); capi.err != nil {
				return
			}
			capi.err = provision(ctx, capi.fleet)
			t.Logf("Cluster API fleet with in-memory cluster %s and %s ready in %s", memCluster, extensionName, time.Since(t0).Round(time.Second))
		}()
	}
	if capi.err != nil {
		t.Fatalf("Cluster API fleet: %v", capi.err)
	}
	mc, err := capi.fleet.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	return capi.fleet, mc
}

// provision creates the in-memory clusters (memCluster, fleetClusters, cpCluster, and
// topologyFleet from its ClusterClass), registers the test extension, and waits for CAPI to
// bring up the Machines of all but cpCluster and topologyFleet.
func provision(ctx context.Context, f *testbed.Fleet) error {
	clusters := []testbed.InMemoryCluster{{Name: memCluster, ControlPlaneVersion: "v1.34.2", WorkerVersion: "v1.34.0", InPlaceRollout: true}}
	// The clusters only one lane's tests use are provisioned on that lane only: on two cores the
	// Cluster API controllers' work for clusters nobody reads slows the fleet's start.
	fleetTests, err := acctest.RunsOnLane(fleetLane)
	if err != nil {
		return err
	}
	controlPlaneTests, err := acctest.RunsOnLane(controlPlaneLane)
	if err != nil {
		return err
	}
	if fleetTests {
		for _, name := range fleetClusters {
			clusters = append(clusters, testbed.InMemoryCluster{Name: name, ControlPlaneVersion: "v1.34.2", WorkerVersion: "v1.34.0", InPlaceRollout: true,
				Labels: map[string]string{fleetLabel: "yes"}})
		}
	}
	if err := f.RegisterTestExtension(ctx, extensionName); err != nil {
		return err
	}
	// KubeadmControlPlane brings cpCluster's three Machines up one after another (about a
	// minute): created now, it comes up meanwhile, and only the test that uses it waits for it.
	if controlPlaneTests {
		if err := f.CreateInMemory(ctx, testbed.InMemoryCluster{Name: cpCluster, ControlPlaneVersion: "v1.34.2", WorkerVersion: "v1.34.0",
			InPlaceRollout: true, ControlPlaneReplicas: 3}); err != nil {
			return err
		}
	}
	// The clusters built from a ClusterClass come up meanwhile too (about 50 s on their own), on
	// both lanes (the version bump's and the variables'); the topology fleet's other two on its
	// lane only.
	if err := f.CreateClusterClass(ctx, topologyClass); err != nil {
		return err
	}
	if err := f.CreateInMemory(ctx, topologyInMemory, topologyVarsInMemory); err != nil {
		return err
	}
	topologyFleetTests, err := acctest.RunsOnLane(topologyFleetLane)
	if err != nil {
		return err
	}
	if topologyFleetTests {
		for _, name := range topologyFleet[1:] {
			if err := f.CreateInMemory(ctx, topologyMember(name)); err != nil {
				return err
			}
		}
	}
	return f.ProvisionInMemory(ctx, clusters...)
}

// playKubelet runs testbed's kubelet stand-in for the clusters (memCluster when none is
// named) until the test ends; clusters are added with Play.
func playKubelet(t *testing.T, mc client.Client, clusters ...string) *testbed.Kubelet {
	t.Helper()
	if len(clusters) == 0 {
		clusters = []string{memCluster}
	}
	k := testbed.NewKubelet(clusters...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		k.Run(ctx, mc, testbed.DefaultClusterAPINamespace)
	}()
	return k
}

func workloadClient(ctx context.Context, mc client.Client, cluster string) (client.Client, error) {
	return testbed.WorkloadClient(ctx, mc, testbed.DefaultClusterAPINamespace, cluster)
}

// worker is the MachineDeployment's one Machine, once CAPI has settled it: one Machine, not
// being deleted, UpToDate and not Updating (a test may start while CAPI finishes the last one's
// work).
func worker(t *testing.T, mc client.Client) clusterv1.Machine {
	t.Helper()
	return workerOf(t, mc, memCluster)
}

// workerOf is worker for the MachineDeployment <cluster>-md-0.
func workerOf(t *testing.T, mc client.Client, cluster string) clusterv1.Machine {
	t.Helper()
	var live []clusterv1.Machine
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list clusterv1.MachineList
		if err := mc.List(ctx, &list, client.InNamespace(testbed.DefaultClusterAPINamespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: cluster + "-md-0"}); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // a failed read is retried until the timeout
		}
		live = live[:0]
		var states []string
		for _, m := range list.Items {
			up := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			updating := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition)
			states = append(states, fmt.Sprintf("%s phase=%s deleting=%v upToDate=%v updating=%v", m.Name, m.Status.Phase, !m.DeletionTimestamp.IsZero(), up, updating))
			if m.DeletionTimestamp.IsZero() {
				live = append(live, m)
			}
		}
		last = strings.Join(states, "; ")
		return len(list.Items) == 1 && len(live) == 1 && meta.IsStatusConditionTrue(live[0].Status.Conditions, clusterv1.MachineUpToDateCondition) &&
			!meta.IsStatusConditionTrue(live[0].Status.Conditions, clusterv1.MachineUpdatingCondition) && live[0].Status.NodeRef.IsDefined(), nil
	})
	if err != nil {
		t.Fatalf("worker Machines not settled: %v; last: %s", err, last)
	}
	return live[0]
}

func machineDeployment(t *testing.T, mc client.Client) clusterv1.MachineDeployment {
	t.Helper()
	var md clusterv1.MachineDeployment
	if err := mc.Get(context.Background(), client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: workers}, &md); err != nil {
		t.Fatal(err)
	}
	return md
}

func config(f *testbed.Fleet, body string) string {
	return acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_inplace_update" "workers" {
  namespace          = %q
  cluster            = %q
  machine_deployment = %q
  verify             = { timeout = "4m" }
%s
}
`, testbed.DefaultClusterAPINamespace, memCluster, workers, body)
}

// checkFunc runs a Go check as a plan check, between plan and apply.
type checkFunc func(context.Context) error

func (c checkFunc) CheckPlan(ctx context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = c(ctx)
}

// A version bump (and a bootstrap file, through the write-only patch) of a MachineDeployment
// that CAPI's test extension covers: the plan previews the worker in place by test-extension;
// after apply CAPI did it in place (the same Machine UID, now on the new version, its Node's
// kubelet too), the MachineDeployment points at a rotated bootstrap template and carries the
// version, and a second plan is empty.
func TestAccCAPIInPlace_versionBumpInPlace(t *testing.T) {
	f, mc := capiFleet(t)
	playKubelet(t, mc)
	before := worker(t, mc)
	oldRef := machineDeployment(t, mc).Spec.Template.Spec.Bootstrap.ConfigRef.Name
	const version = "v1.34.1"
	cfg := config(f, `  version                     = "`+version+`"
  bootstrap_config_spec_patch = jsonencode({ files = [{ path = "/etc/gradual-demo", content = "in place" }] })
  fallback                    = "none"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact(before.Name)),
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("strategy"), knownvalue.StringExact("in-place")),
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("extensions"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(extensionName)})),
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("bootstrap_config_spec_patch_digest"), knownvalue.StringRegexp(regexp.MustCompile(`^sha256:[0-9a-f]{16}$`))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("status"),
					knownvalue.MapExact(map[string]knownvalue.Check{before.Name: knownvalue.StringExact("updated")})),
				statecheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("bootstrap_config_spec_patch"), knownvalue.Null()),
			},
			Check: func(*terraform.State) error {
				after := worker(t, mc)
				if after.UID != before.UID || after.Name != before.Name {
					return fmt.Errorf("worker Machine %s (%s) replaced by %s (%s): CAPI did not update it in place", before.Name, before.UID, after.Name, after.UID)
				}
				if after.Spec.Version != version {
					return fmt.Errorf("worker Machine on %s, want %s", after.Spec.Version, version)
				}
				md := machineDeployment(t, mc)
				if md.Spec.Template.Spec.Version != version {
					return fmt.Errorf("MachineDeployment template version %s", md.Spec.Template.Spec.Version)
				}
				ref := md.Spec.Template.Spec.Bootstrap.ConfigRef.Name
				if ref == oldRef || !strings.Contains(ref, "-gip-") {
					return fmt.Errorf("bootstrap template %s → %s: not rotated", oldRef, ref)
				}
				wc, err := workloadClient(context.Background(), mc, memCluster)
				if err != nil {
					return err
				}
				var n corev1.Node
				if err := wc.Get(context.Background(), client.ObjectKey{Name: after.Status.NodeRef.Name}, &n); err != nil {
					return err
				}
				if n.Status.NodeInfo.KubeletVersion != version {
					return fmt.Errorf("Node %s kubelet %s", n.Name, n.Status.NodeInfo.KubeletVersion)
				}
				t.Logf("preview in-place by %s; CAPI kept Machine %s (UID %s), Node %s on %s, bootstrap template %s → %s",
					extensionName, after.Name, after.UID, n.Name, version, oldRef, ref)
				return nil
			},
		}},
	})
}

// A change CAPI's test extension does not cover (the in-memory VM's startup duration, a
// DevMachine field) with fallback "none" is refused at plan, naming the machine and the field;
// nothing is written (no rotated template, the MachineDeployment unchanged).
func TestAccCAPIInPlace_uncoveredRefusedAtPlan(t *testing.T) {
	f, mc := capiFleet(t)
	md := machineDeployment(t, mc)
	m := worker(t, mc)
	cfg := config(f, `  infrastructure_machine_spec_patch = jsonencode({ backend = { inMemory = { vm = { provisioning = { startupDuration = "2s" } } } } })
  fallback                          = "none"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ExpectError: regexp.MustCompile(`(?s)Machines Cannot Be Updated In Place.*machine\s+` + regexp.QuoteMeta(m.Name) +
					`:\s+no\s+extension\s+can\s+update.*startupDuration`),
			},
			{
				PreConfig: func() {
					now := machineDeployment(t, mc)
					if now.Generation != md.Generation || now.Spec.Template.Spec.InfrastructureRef.Name != md.Spec.Template.Spec.InfrastructureRef.Name {
						t.Errorf("MachineDeployment written by a refused plan: generation %d → %d, infrastructureRef %s → %s",
							md.Generation, now.Generation, md.Spec.Template.Spec.InfrastructureRef.Name, now.Spec.Template.Spec.InfrastructureRef.Name)
					}
					list := &unstructured.UnstructuredList{}
					list.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
					list.SetKind("DevMachineTemplateList")
					if err := mc.List(context.Background(), list, client.InNamespace(testbed.DefaultClusterAPINamespace)); err != nil {
						t.Fatal(err)
					}
					for _, tmpl := range list.Items {
						if strings.Contains(tmpl.GetName(), "-gip-") {
							t.Errorf("a refused plan created DevMachineTemplate %s", tmpl.GetName())
						}
					}
					if now := worker(t, mc); now.UID != m.UID {
						t.Errorf("worker Machine replaced after a refused plan")
					}
				},
				Config:             config(f, `  fallback = "none"`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// A plan made while the extension covered the change, applied after it was removed: the apply
// stops (Terraform's apply-time plan finds the machine uncovered and says a plan that showed it
// in place is stale) and writes nothing: it never turns into a replacement.
func TestAccCAPIInPlace_stalePlanStopsApply(t *testing.T) {
	f, mc := capiFleet(t)
	md := machineDeployment(t, mc)
	m := worker(t, mc)
	t.Cleanup(func() {
		if err := f.RegisterTestExtension(context.Background(), extensionName); err != nil {
			t.Errorf("register %s again: %v", extensionName, err)
		}
	})
	removeExtension := checkFunc(func(ctx context.Context) error {
		ec := &unstructured.Unstructured{}
		ec.SetAPIVersion("runtime.cluster.x-k8s.io/v1beta2")
		ec.SetKind("ExtensionConfig")
		ec.SetName(extensionName)
		return mc.Delete(ctx, ec)
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: config(f, `  version  = "v1.34.2"
  fallback = "none"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("strategy"), knownvalue.StringExact("in-place")),
					removeExtension,
				}},
				// Terraform plans again at apply; that plan finds no extension and stops the apply.
				ExpectError: regexp.MustCompile(`(?s)Machines Cannot Be Updated In Place.*machine\s+` + regexp.QuoteMeta(m.Name) + `:\s+no\s+extension.*plan\s+is\s+stale.*Nothing\s+was\s+written`),
			},
			{
				PreConfig: func() {
					now := machineDeployment(t, mc)
					if now.Generation != md.Generation || now.Spec.Template.Spec.Version != md.Spec.Template.Spec.Version {
						t.Errorf("MachineDeployment written by a stale apply: generation %d → %d, version %s → %s",
							md.Generation, now.Generation, md.Spec.Template.Spec.Version, now.Spec.Template.Spec.Version)
					}
				},
				Config:             config(f, `  fallback = "none"`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// The other direction of the preview: a change no extension covers, with fallback "rolling",
// is previewed as a replacement naming the field, and CAPI does replace the Machine (a new UID);
// the infrastructure template is rotated, and status says which Machine went and which came.
func TestAccCAPIInPlace_uncoveredReplaced(t *testing.T) {
	acctest.OnOneLane(t, 1) // what Cluster API does with the write, not how a CLI drives it
	f, mc := capiFleet(t)
	before := worker(t, mc)
	oldRef := machineDeployment(t, mc).Spec.Template.Spec.InfrastructureRef.Name
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: config(f, `  infrastructure_machine_spec_patch = jsonencode({ backend = { inMemory = { vm = { provisioning = { startupDuration = "2s" } } } } })
  fallback                          = "rolling"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("strategy"), knownvalue.StringExact("rolling")),
				plancheck.ExpectKnownValue("gradual_inplace_update.workers", tfjsonpath.New("plan").AtSliceIndex(0).AtMapKey("uncovered_fields"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("infrastructureMachine spec.backend.inMemory.vm.provisioning.startupDuration")})),
			}},
			Check: func(s *terraform.State) error {
				after := worker(t, mc)
				if after.UID == before.UID {
					return fmt.Errorf("worker Machine %s (%s) kept: the preview said CAPI replaces it", before.Name, before.UID)
				}
				ref := machineDeployment(t, mc).Spec.Template.Spec.InfrastructureRef.Name
				if ref == oldRef || !strings.Contains(ref, "-gip-") {
					return fmt.Errorf("infrastructure template %s → %s: not rotated", oldRef, ref)
				}
				attrs := s.RootModule().Resources["gradual_inplace_update.workers"].Primary.Attributes
				if attrs["status."+before.Name] != "replaced" || attrs["status."+after.Name] != "created" {
					return fmt.Errorf("status %s=%q, %s=%q; want replaced and created", before.Name, attrs["status."+before.Name], after.Name, attrs["status."+after.Name])
				}
				t.Logf("preview rolling; CAPI replaced Machine %s (%s) by %s (%s); infrastructure template %s → %s", before.Name, before.UID, after.Name, after.UID, oldRef, ref)
				return nil
			},
		}},
	})
}

// The read-only plan data source asks the same questions and writes nothing: a version bump the
// test extension covers is in place, the MachineDeployment untouched.
func TestAccCAPIInPlace_planDataSource(t *testing.T) {
	f, mc := capiFleet(t)
	m := worker(t, mc)
	md := machineDeployment(t, mc)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_inplace_update_plan" "workers" {
  namespace          = %q
  cluster            = %q
  machine_deployment = %q
  version            = "v1.34.5"
}
`, testbed.DefaultClusterAPINamespace, memCluster, workers),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.gradual_inplace_update_plan.workers", tfjsonpath.New("machines").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact(m.Name)),
				statecheck.ExpectKnownValue("data.gradual_inplace_update_plan.workers", tfjsonpath.New("machines").AtSliceIndex(0).AtMapKey("strategy"), knownvalue.StringExact("in-place")),
				statecheck.ExpectKnownValue("data.gradual_inplace_update_plan.workers", tfjsonpath.New("counts").AtMapKey("in_place"), knownvalue.Int64Exact(1)),
			},
			Check: func(*terraform.State) error {
				if now := machineDeployment(t, mc); now.Generation != md.Generation {
					return fmt.Errorf("the data source wrote the MachineDeployment: generation %d → %d", md.Generation, now.Generation)
				}
				return nil
			},
		}},
	})
}
