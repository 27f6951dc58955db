package inplaceupdate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// Two control plane Machines (picked by control_plane, not by MachineDeployment) are updated
// in place one after another; the worker Machine of the same cluster is left alone.
func TestAccInplaceUpdate_controlPlane(t *testing.T) {
	b, cp, cpMachines := newControlPlaneBed(t, 2)
	srv := b.extension(t, "ref", nil, time.Second)
	const version = "v1.37.0"
	cfg := acctest.ProviderConfig(b.f) + fmt.Sprintf(`resource "gradual_inplace_update" "u" {
  namespace     = %q
  cluster       = %q
  control_plane = %q
  version       = %q
  update_limit  = 1
  verify        = { timeout = "60s" }
`, b.f.Namespace, b.cluster, cp, version) + extensionsHCL(extOf("ref", srv)) + "}\n"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(updateRes, tfjsonpath.New("plan"), knownvalue.ListSizeExact(2)),
				plancheck.ExpectKnownValue(updateRes, tfjsonpath.New("plan").AtSliceIndex(1), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"name": knownvalue.StringExact(cpMachines[1]), "node": knownvalue.StringExact("kwok-node-2"),
					"strategy": knownvalue.StringExact("in-place"), "extensions": strs("ref"),
					"changed_fields": strs("machine spec.version"),
				})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(updateRes, tfjsonpath.New("id"), knownvalue.StringExact(b.f.Namespace+"/"+b.cluster+"/control-plane:"+cp)),
				statecheck.ExpectKnownValue(updateRes, tfjsonpath.New("status"), knownvalue.MapExact(map[string]knownvalue.Check{
					cpMachines[0]: knownvalue.StringExact("updated"), cpMachines[1]: knownvalue.StringExact("updated"),
				})),
			},
			Check: func(*terraform.State) error {
				var prev time.Time
				for i, m := range cpMachines {
					if got := b.kubelet(t, fmt.Sprintf("kwok-node-%d", i+1)); got != version {
						return fmt.Errorf("kwok-node-%d reports kubelet %s, want %s", i+1, got, version)
					}
					if v, _, _ := unstructured.NestedString(b.get(t, machineGVK, m).Object, "spec", "version"); v != version {
						return fmt.Errorf("machine %s spec.version %s", m, v)
					}
					at, ok := b.nodes.finished(m)
					if !ok {
						return fmt.Errorf("machine %s: the extension never finished it", m)
					}
					if i > 0 && at.Sub(prev) < 500*time.Millisecond {
						return fmt.Errorf("machine %s finished %s after %s: updated concurrently", m, at.Sub(prev), cpMachines[i-1])
					}
					prev = at
				}
				// The worker is no part of the control plane.
				if got := b.kubelet(t, "kwok-node-0"); got != testbed.KubeletVersion {
					return fmt.Errorf("worker Node kwok-node-0 reports kubelet %s, want it untouched at %s", got, testbed.KubeletVersion)
				}
				if v, _, _ := unstructured.NestedString(b.get(t, machineGVK, b.machines[0]).Object, "spec", "version"); v != testbed.KubeletVersion {
					return fmt.Errorf("worker machine %s spec.version %s, want it untouched", b.machines[0], v)
				}
				return nil
			},
		}},
	})
}

// newControlPlaneBed is a bed whose workload has one worker Machine (of a MachineDeployment, on
// kwok-node-0) and a control plane of cpReplicas Machines (on kwok-node-1…); it returns the
// control plane's name and Machines.
func newControlPlaneBed(t *testing.T, cpReplicas int) (*bed, string, []string) {
	t.Helper()
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("inplace-cp")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := f.AddWorkload(ctx, testbed.WorkloadSpec{Name: name, Labels: map[string]string{"run": name}, Ready: true, Nodes: 1 + cpReplicas}); err != nil {
		t.Fatalf("add workload %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := f.RemoveWorkload(ctx, name); err != nil {
			t.Errorf("remove workload %s: %v", name, err)
		}
	})
	t.Cleanup(func() { deleteMachineObjects(t, f, name) })
	workers, err := f.AddMachineDeployment(ctx, testbed.MachineDeploymentSpec{Cluster: name, Name: name + "-md", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	cp := name + "-cp"
	cpMachines, err := f.AddControlPlane(ctx, testbed.ControlPlaneSpec{Cluster: name, Name: cp, Replicas: cpReplicas, FirstNode: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &bed{f: f, cluster: name, machines: workers}, cp, cpMachines
}
