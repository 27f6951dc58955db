package inplaceupdate_test

import (
	"context"
	"fmt"
	"strings"
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
// test extension covers the change). Created by the test that uses it.
const (
	topologyCluster = "mem-topo"
	topologyClass   = "in-memory-gradual"
	// topologyLane is the lane of the test that uses topologyCluster (see provision).
	topologyLane = 1
)

var topologyInMemory = testbed.InMemoryCluster{Name: topologyCluster, Class: topologyClass, ControlPlaneVersion: "v1.34.2", InPlaceRollout: true}

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
	acctest.OnOneLane(t, topologyLane) // what the topology controller and Cluster API do with the write, not how a CLI drives it
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
