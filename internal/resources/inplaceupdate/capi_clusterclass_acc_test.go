package inplaceupdate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// topologyCluster is an in-memory cluster built from ClusterClass topologyClass: a one-replica
// control plane (KubeadmControlPlane's default maxSurge 1: Cluster API replaces its Machine) and
// one MachineDeployment "md-0" rolled out with maxSurge 0 / maxUnavailable 1 (in place where the
// test extension covers the change). The shared fleet creates it on both lanes (the single
// cluster's bump runs on both CLIs); topologyFleet adds two more like it on topologyFleetLane.
//
// These tests sit in a file that sorts before capi_gate_acc_test.go: TestAccCAPIInPlace_gateOff
// stops the shared fleet, and a test after it would start it again (clusters and all).
const (
	topologyCluster = "mem-topo"
	topologyClass   = "in-memory-gradual"
	// topologyFleetLane is the lane of TestAccCAPIInPlace_topologyFleetCanary (see provision):
	// the lane whose Cluster API stage is the shorter.
	topologyFleetLane = 1
	// topologyFleetLabel picks the three clusters of topologyFleet.
	topologyFleetLabel = "gradual.dev/topology-fleet-test"
)

var topologyInMemory = topologyMember(topologyCluster)

// topologyFleet are the clusters TestAccCAPIInPlace_topologyFleetCanary upgrades: topologyCluster
// (which TestAccCAPIInPlace_topologyVersionBump upgrades first when both run) and two more.
var topologyFleet = []string{topologyCluster, topologyCluster + "-2", topologyCluster + "-3"}

func topologyMember(name string) testbed.InMemoryCluster {
	return testbed.InMemoryCluster{Name: name, Class: topologyClass, ControlPlaneVersion: "v1.34.2", InPlaceRollout: true,
		Labels: map[string]string{topologyFleetLabel: "yes"}}
}

// topologyMachines are the cluster's control plane and worker Machines once Cluster API has
// settled them: one of each, none being deleted, each UpToDate, not Updating, with a Node.
func topologyMachines(t *testing.T, mc client.Client, cluster string) (cp, worker clusterv1.Machine) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list clusterv1.MachineList
		if err := mc.List(ctx, &list, client.InNamespace(testbed.DefaultClusterAPINamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // a failed read is retried until the timeout
		}
		var states []string
		var cps, workers []clusterv1.Machine
		settled := true
		for _, m := range list.Items {
			up := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			updating := meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition)
			states = append(states, fmt.Sprintf("%s phase=%s deleting=%v upToDate=%v updating=%v", m.Name, m.Status.Phase, !m.DeletionTimestamp.IsZero(), up, updating))
			settled = settled && m.DeletionTimestamp.IsZero() && up && !updating && m.Status.NodeRef.IsDefined()
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				cps = append(cps, m)
			} else {
				workers = append(workers, m)
			}
		}
		last = strings.Join(states, "; ")
		if !settled || len(cps) != 1 || len(workers) != 1 {
			return false, nil
		}
		cp, worker = cps[0], workers[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("Machines of %s not settled: %v; last: %s", cluster, err, last)
	}
	return cp, worker
}

// nodeVersion is the kubelet version the Node of m reports in cluster.
func nodeVersion(mc client.Client, cluster string, m clusterv1.Machine) (string, error) {
	wc, err := workloadClient(context.Background(), mc, cluster)
	if err != nil {
		return "", err
	}
	var n corev1.Node
	if err := wc.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, &n); err != nil {
		return "", err
	}
	return n.Status.NodeInfo.KubeletVersion, nil
}

func topologyConfig(f *testbed.Fleet, version string) string {
	return acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_inplace_update_plan" "topology" {
  namespace            = %[1]q
  cluster              = %[2]q
  update_control_plane = true
  version              = %[3]q
  fallback             = "rolling"
}

resource "gradual_inplace_update" "topology" {
  namespace            = %[1]q
  cluster              = %[2]q
  update_control_plane = true
  version              = %[3]q
  fallback             = "rolling"
  verify               = { timeout = "4m" }
}
`, testbed.DefaultClusterAPINamespace, topologyCluster, version)
}

// A version bump of a cluster built from a ClusterClass: the preview (the plan data source, read
// before the apply) shows the control plane Machine replaced (one replica, maxSurge 1) and the
// worker in place by the test extension; apply writes spec.topology.version to the Cluster only
// (the KubeadmControlPlane and the MachineDeployment, which the topology controller manages,
// carry no revision of this resource), the topology controller upgrades the control plane and
// then the MachineDeployment, and Cluster API does what the preview said: a new control plane
// Machine, the same worker Machine (UID) on the new version, both Nodes on it. The plan after
// apply is empty.
func TestAccCAPIInPlace_topologyVersionBump(t *testing.T) {
	// A topology bump runs on both CLIs: this one on OpenTofu's lane, and on Terraform's lane
	// TestAccCAPIInPlace_topologyFleetCanary bumps this cluster and two more (its time is CI's
	// longest queue, so the single bump is not repeated there).
	acctest.OnOneLane(t, 1-topologyFleetLane)
	f, mc := capiFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t0 := time.Now()
	// provision created them with the shared fleet; created again, they are left as they are.
	if err := f.CreateClusterClass(ctx, topologyClass); err != nil {
		t.Fatal(err)
	}
	if err := f.ProvisionInMemory(ctx, topologyInMemory); err != nil {
		t.Fatalf("provision %s from ClusterClass %s: %v", topologyCluster, topologyClass, err)
	}
	playKubelet(t, mc, topologyCluster)
	cpBefore, workerBefore := topologyMachines(t, mc, topologyCluster)
	t.Logf("%s built from ClusterClass %s (waited %s)", topologyCluster, topologyClass, time.Since(t0).Round(time.Second))
	const version = "v1.34.3"
	const res, plan = "gradual_inplace_update.topology", "data.gradual_inplace_update_plan.topology"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{{
			Config: topologyConfig(f, version),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(plan, tfjsonpath.New("counts"), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"total": knownvalue.Int64Exact(2), "in_place": knownvalue.Int64Exact(1), "rolling": knownvalue.Int64Exact(1)})),
				statecheck.ExpectKnownValue(res, tfjsonpath.New("status"), knownvalue.MapPartial(map[string]knownvalue.Check{
					workerBefore.Name: knownvalue.StringExact(owners.StatusUpdated), cpBefore.Name: knownvalue.StringExact(owners.StatusReplaced)})),
			},
			Check: func(s *terraform.State) error {
				// The preview, machine by machine, in the topology's order: control plane first.
				attrs := s.RootModule().Resources[plan].Primary.Attributes
				preview := map[string]string{}
				var order []string
				for i := 0; attrs[fmt.Sprintf("machines.%d.name", i)] != ""; i++ {
					name := attrs[fmt.Sprintf("machines.%d.name", i)]
					preview[name] = attrs[fmt.Sprintf("machines.%d.strategy", i)]
					order = append(order, name)
				}
				if preview[cpBefore.Name] != "rolling" || preview[workerBefore.Name] != "in-place" || len(order) != 2 || order[0] != cpBefore.Name {
					return fmt.Errorf("preview %v (order %v); want control plane %s rolling first, worker %s in-place", preview, order, cpBefore.Name, workerBefore.Name)
				}
				cpAfter, workerAfter := topologyMachines(t, mc, topologyCluster)
				if workerAfter.UID != workerBefore.UID || workerAfter.Spec.Version != version {
					return fmt.Errorf("worker %s (%s) → %s (%s) on %s: want the same Machine on %s", workerBefore.Name, workerBefore.UID, workerAfter.Name, workerAfter.UID, workerAfter.Spec.Version, version)
				}
				if cpAfter.UID == cpBefore.UID || cpAfter.Spec.Version != version {
					return fmt.Errorf("control plane Machine %s (%s) → %s (%s) on %s: want a replacement on %s", cpBefore.Name, cpBefore.UID, cpAfter.Name, cpAfter.UID, cpAfter.Spec.Version, version)
				}
				for _, m := range []clusterv1.Machine{cpAfter, workerAfter} {
					if v, err := nodeVersion(mc, topologyCluster, m); err != nil || v != version {
						return fmt.Errorf("Node of %s: kubelet %s (%v), want %s", m.Name, v, err, version)
					}
				}
				var cl clusterv1.Cluster
				if err := mc.Get(context.Background(), client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: topologyCluster}, &cl); err != nil {
					return err
				}
				if cl.Spec.Topology.Version != version || cl.Annotations[owners.AnnotationRevision] == "" {
					return fmt.Errorf("Cluster spec.topology.version %s, revision %q: want %s and the revision", cl.Spec.Topology.Version, cl.Annotations[owners.AnnotationRevision], version)
				}
				var mds clusterv1.MachineDeploymentList
				if err := mc.List(context.Background(), &mds, client.InNamespace(testbed.DefaultClusterAPINamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: topologyCluster}); err != nil {
					return err
				}
				for _, md := range mds.Items {
					if md.Annotations[owners.AnnotationRevision] != "" || md.Spec.Template.Spec.Version != version {
						return fmt.Errorf("MachineDeployment %s: version %s, revision %q: want the topology controller's %s and no revision of ours", md.Name, md.Spec.Template.Spec.Version, md.Annotations[owners.AnnotationRevision], version)
					}
				}
				t.Logf("preview: control plane %s rolling, worker %s in-place; Cluster API: control plane %s → %s, worker %s kept (UID %s), Nodes on %s",
					cpBefore.Name, workerBefore.Name, cpBefore.Name, cpAfter.Name, workerAfter.Name, workerAfter.UID, version)
				return nil
			},
		}},
	})
}

// topologyFleetVersion is the version the topology fleet goes to: past the single cluster's bump
// (TestAccCAPIInPlace_topologyVersionBump, which runs first when both run), so that all three
// clusters change whichever ran.
const topologyFleetVersion = "v1.34.4"

// topologyCanary is the topology fleet's canary.
var topologyCanary = topologyFleet[1]

func topologyFleetConfig(f *testbed.Fleet) string {
	return acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_inplace_update_plan" "topology_fleet" {
  namespace            = %[1]q
  selector             = { match_labels = { %[2]q = "yes" } }
  update_control_plane = true
  version              = %[3]q
  fallback             = "rolling"
}

resource "gradual_inplace_update" "topology_fleet" {
  namespace            = %[1]q
  selector             = { match_labels = { %[2]q = "yes" } }
  update_control_plane = true
  version              = %[3]q
  canary               = [%[4]q]
  update_limit         = "2"
  fallback             = "rolling"
  verify               = { timeout = "4m" }
}
`, testbed.DefaultClusterAPINamespace, topologyFleetLabel, topologyFleetVersion, topologyCanary)
}

// clusterTimes are when a watcher saw each cluster's upgrade start (spec.topology.version
// written) and end (both Machines on the version, settled, their Nodes' kubelets on it).
type clusterTimes struct {
	mu            sync.Mutex
	written, done map[string]time.Time
	stop          context.CancelFunc
	stopped       chan struct{}
}

// watchTopologyFleet polls the clusters every second until stop is called.
func watchTopologyFleet(mc client.Client, clusters []string, version string) *clusterTimes {
	ctx, cancel := context.WithCancel(context.Background())
	w := &clusterTimes{written: map[string]time.Time{}, done: map[string]time.Time{}, stop: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			for _, c := range clusters {
				w.mu.Lock()
				written, done := !w.written[c].IsZero(), !w.done[c].IsZero()
				w.mu.Unlock()
				if done {
					continue
				}
				now := time.Now()
				if !written {
					var cl clusterv1.Cluster
					if err := mc.Get(ctx, client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: c}, &cl); err != nil || cl.Spec.Topology.Version != version {
						continue
					}
					w.mu.Lock()
					w.written[c] = now
					w.mu.Unlock()
				}
				if upgraded(ctx, mc, c, version) {
					w.mu.Lock()
					w.done[c] = now
					w.mu.Unlock()
				}
			}
			return false, nil
		})
	}()
	return w
}

// upgraded says whether cluster's control plane and worker Machines are on version, settled,
// and their Nodes' kubelets report it.
func upgraded(ctx context.Context, mc client.Client, cluster, version string) bool {
	var list clusterv1.MachineList
	if err := mc.List(ctx, &list, client.InNamespace(testbed.DefaultClusterAPINamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil || len(list.Items) != 2 {
		return false
	}
	for _, m := range list.Items {
		if m.Spec.Version != version || !m.DeletionTimestamp.IsZero() || !m.Status.NodeRef.IsDefined() ||
			!meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition) ||
			meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition) {
			return false
		}
	}
	wc, err := workloadClient(ctx, mc, cluster)
	if err != nil {
		return false
	}
	for _, m := range list.Items {
		var n corev1.Node
		if err := wc.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &n); err != nil || n.Status.NodeInfo.KubeletVersion != version {
			return false
		}
	}
	return true
}

// times stops the watcher and returns what it saw.
func (w *clusterTimes) times() (written, done map[string]time.Time) {
	w.stop()
	<-w.stopped
	return w.written, w.done
}

// The fleet form over three clusters built from a ClusterClass, picked by label, canary first
// and then the other two together (update_limit 2): the plan data source, read before the apply,
// previews each cluster's control plane Machine replaced (one replica, maxSurge 1) and its worker
// in place by the test extension. Apply writes spec.topology.version cluster by cluster as the
// waves say, and Cluster API does what the preview said in each: a new control plane Machine,
// the same worker Machine (UID) on the new version, both Nodes on it. A watcher of the Clusters
// and Machines shows the waves carried out in order: the canary was upgraded (Machines and
// Nodes on the version) before either other Cluster was written, and the second wave's two were
// both written before either finished (one wave, not two). The next plan is empty.
func TestAccCAPIInPlace_topologyFleetCanary(t *testing.T) {
	acctest.OnOneLane(t, topologyFleetLane) // the fleet's pacing against the controllers, not how a CLI drives it
	f, mc := capiFleet(t)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var members []testbed.InMemoryCluster
	for _, c := range topologyFleet {
		members = append(members, topologyMember(c))
	}
	// provision created them with the shared fleet; created again, they are left as they are.
	if err := f.CreateClusterClass(ctx, topologyClass); err != nil {
		t.Fatal(err)
	}
	if err := f.ProvisionInMemory(ctx, members...); err != nil {
		t.Fatalf("provision %v from ClusterClass %s: %v", topologyFleet, topologyClass, err)
	}
	playKubelet(t, mc, topologyFleet...)
	cpBefore, workerBefore := map[string]clusterv1.Machine{}, map[string]clusterv1.Machine{}
	for _, c := range topologyFleet {
		cpBefore[c], workerBefore[c] = topologyMachines(t, mc, c)
	}
	t.Logf("%v built from ClusterClass %s (waited %s)", topologyFleet, topologyClass, time.Since(t0).Round(time.Second))
	const res, plan = "gradual_inplace_update.topology_fleet", "data.gradual_inplace_update_plan.topology_fleet"
	w := watchTopologyFleet(mc, topologyFleet, topologyFleetVersion)
	defer w.times()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: topologyFleetConfig(f),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(plan, tfjsonpath.New("counts"), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"total": knownvalue.Int64Exact(6), "in_place": knownvalue.Int64Exact(3), "rolling": knownvalue.Int64Exact(3)})),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.StringExact("2 waves: 1 canary wave of 1 cluster, then 1 wave of 2 clusters")),
				},
				Check: func(s *terraform.State) error {
					// The preview, machine by machine.
					attrs := s.RootModule().Resources[plan].Primary.Attributes
					preview := map[string]string{}
					for i := 0; attrs[fmt.Sprintf("machines.%d.name", i)] != ""; i++ {
						preview[attrs[fmt.Sprintf("machines.%d.name", i)]] = attrs[fmt.Sprintf("machines.%d.strategy", i)]
					}
					written, done := w.times()
					var errs []string
					for _, c := range topologyFleet {
						if preview[cpBefore[c].Name] != "rolling" || preview[workerBefore[c].Name] != "in-place" {
							errs = append(errs, fmt.Sprintf("%s: preview control plane %s %q, worker %s %q; want rolling and in-place", c, cpBefore[c].Name, preview[cpBefore[c].Name], workerBefore[c].Name, preview[workerBefore[c].Name]))
						}
						cpAfter, workerAfter := topologyMachines(t, mc, c)
						if workerAfter.UID != workerBefore[c].UID || workerAfter.Spec.Version != topologyFleetVersion {
							errs = append(errs, fmt.Sprintf("%s: worker %s (%s) → %s (%s) on %s: want the same Machine on %s", c, workerBefore[c].Name, workerBefore[c].UID, workerAfter.Name, workerAfter.UID, workerAfter.Spec.Version, topologyFleetVersion))
						}
						if cpAfter.UID == cpBefore[c].UID || cpAfter.Spec.Version != topologyFleetVersion {
							errs = append(errs, fmt.Sprintf("%s: control plane %s (%s) → %s (%s) on %s: want a replacement on %s", c, cpBefore[c].Name, cpBefore[c].UID, cpAfter.Name, cpAfter.UID, cpAfter.Spec.Version, topologyFleetVersion))
						}
						var nodes []string
						for _, m := range []clusterv1.Machine{cpAfter, workerAfter} {
							v, err := nodeVersion(mc, c, m)
							if err != nil || v != topologyFleetVersion {
								errs = append(errs, fmt.Sprintf("%s: Node of %s: kubelet %s (%v), want %s", c, m.Name, v, err, topologyFleetVersion))
							}
							nodes = append(nodes, m.Status.NodeRef.Name+"="+v)
						}
						t.Logf("%s: preview control plane %s rolling, worker %s in-place; Cluster API: control plane %s → %s, worker %s kept (UID %s); Nodes %v; written +%s, upgraded +%s",
							c, cpBefore[c].Name, workerBefore[c].Name, cpBefore[c].Name, cpAfter.Name, workerAfter.Name, workerAfter.UID, nodes,
							written[c].Sub(t0).Round(time.Second), done[c].Sub(t0).Round(time.Second))
					}
					// The waves, as the watcher saw them: the canary upgraded before the others were
					// written; the second wave's two written before either was upgraded.
					rest := topologyFleet[:0:0]
					for _, c := range topologyFleet {
						if c != topologyCanary {
							rest = append(rest, c)
						}
					}
					for _, c := range topologyFleet {
						if written[c].IsZero() || done[c].IsZero() {
							errs = append(errs, fmt.Sprintf("%s: the watcher saw it written at %v, upgraded at %v", c, written[c], done[c]))
						}
					}
					for _, c := range rest {
						if !written[c].After(done[topologyCanary]) {
							errs = append(errs, fmt.Sprintf("%s written at %s, before the canary %s was upgraded (%s)", c, written[c].Format(time.TimeOnly), topologyCanary, done[topologyCanary].Format(time.TimeOnly)))
						}
					}
					if a, b := rest[0], rest[1]; written[a].After(done[b]) || written[b].After(done[a]) {
						errs = append(errs, fmt.Sprintf("%s and %s (one wave, update_limit 2) not upgraded together: written %s and %s, upgraded %s and %s", a, b,
							written[a].Format(time.TimeOnly), written[b].Format(time.TimeOnly), done[a].Format(time.TimeOnly), done[b].Format(time.TimeOnly)))
					}
					if len(errs) > 0 {
						return errors.New(strings.Join(errs, "\n"))
					}
					return nil
				},
			},
			{
				// Nothing left to do: the next plan is empty.
				Config:             topologyFleetConfig(f),
				PlanOnly:           true,
				ExpectNonEmptyPlan: false,
			},
		},
	})
}
