package inplaceupdate_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/live"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

const updateRes = "gradual_inplace_update.u"

func updateConfig(b *bed, body string) string {
	return acctest.ProviderConfig(b.f) + "resource \"gradual_inplace_update\" \"u\" {\n" + b.targetHCL() + body +
		"  verify = { timeout = \"60s\" }\n}\n"
}

func (b *bed) kubelet(t *testing.T, node string) string {
	t.Helper()
	wc, err := b.f.WorkloadClient(b.cluster)
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := wc.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	return n.Status.NodeInfo.KubeletVersion
}

func (b *bed) get(t *testing.T, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	mc, err := b.f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := mc.Get(context.Background(), client.ObjectKey{Namespace: b.f.Namespace, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

var (
	machineGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	mdGVK      = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	kubeadmGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
)

// Three machines with update_limit = 1 are updated one after another: each Node reports the
// new kubelet version, the Machines and bootstrap configs hold the desired specs, and a
// re-apply with nothing to change calls no UpdateMachine.
func TestAccInplaceUpdate_oneAtATime(t *testing.T) {
	b := newBed(t, 3)
	srv := b.extension(t, "ref", nil, 1500*time.Millisecond)
	const version = "v1.37.0"
	cfg := updateConfig(b, fmt.Sprintf(`  version = %q
  bootstrap_config_spec_patch = jsonencode({ ntp = { servers = ["pool.ntp.org"] } })
  update_limit = 1
`, version)+extensionsHCL(extOf("ref", srv)))
	revision := live.Revision(inplace.Change{Version: version, BootstrapConfigSpec: []byte(`{"ntp":{"servers":["pool.ntp.org"]}}`)})
	updates := 0
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(updateRes, tfjsonpath.New("plan").AtSliceIndex(2), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"name": knownvalue.StringExact(b.machines[2]), "node": knownvalue.StringExact("kwok-node-2"),
						"strategy": knownvalue.StringExact("in-place"), "extensions": strs("ref"),
						"changed_fields": strs("machine spec.version", "bootstrapConfig spec.ntp.servers"),
					})),
					plancheck.ExpectUnknownValue(updateRes, tfjsonpath.New("status")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(updateRes, tfjsonpath.New("status"), knownvalue.MapExact(map[string]knownvalue.Check{
						b.machines[0]: knownvalue.StringExact("updated"), b.machines[1]: knownvalue.StringExact("updated"), b.machines[2]: knownvalue.StringExact("updated"),
					})),
					statecheck.ExpectKnownValue(updateRes, tfjsonpath.New("revision"), knownvalue.StringExact(revision)),
				},
				Check: func(*terraform.State) error {
					var prev time.Time
					for i, m := range b.machines {
						if got := b.kubelet(t, fmt.Sprintf("kwok-node-%d", i)); got != version {
							return fmt.Errorf("kwok-node-%d reports kubelet %s, want %s", i, got, version)
						}
						machine := b.get(t, machineGVK, m)
						if v, _, _ := unstructured.NestedString(machine.Object, "spec", "version"); v != version {
							return fmt.Errorf("machine %s spec.version %s", m, v)
						}
						if a := machine.GetAnnotations(); a[live.AnnotationRevision] != revision || a[live.AnnotationState] != live.StateDone {
							return fmt.Errorf("machine %s annotations %v", m, a)
						}
						kc := b.get(t, kubeadmGVK, m)
						if s, _, _ := unstructured.NestedStringSlice(kc.Object, "spec", "ntp", "servers"); len(s) != 1 || s[0] != "pool.ntp.org" {
							return fmt.Errorf("KubeadmConfig %s spec.ntp.servers %v", m, s)
						}
						at, ok := b.nodes.finished(m)
						if !ok {
							return fmt.Errorf("machine %s: the extension never finished it", m)
						}
						// One at a time: each update takes the extension's 1.5 s delay after the
						// previous one was verified.
						if i > 0 && at.Sub(prev) < time.Second {
							return fmt.Errorf("machine %s finished %s after %s: updated concurrently", m, at.Sub(prev), b.machines[i-1])
						}
						prev = at
					}
					updates = srv.Calls()["UpdateMachine"]
					return nil
				},
			},
			{
				// Nothing changed: an empty plan, and applying it calls no UpdateMachine.
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(updateRes, plancheck.ResourceActionNoop),
				}},
				Check: func(*terraform.State) error {
					if n := srv.Calls()["UpdateMachine"]; n != updates {
						return fmt.Errorf("re-apply called UpdateMachine %d more times", n-updates)
					}
					return nil
				},
			},
		},
	})
}

// A change no extension covers, with fallback = "rolling", asks CAPI to replace the machines:
// the MachineDeployment's spec.rollout.after is set and no UpdateMachine is called.
func TestAccInplaceUpdate_rollingFallback(t *testing.T) {
	b := newBed(t, 2)
	srv := b.extension(t, "ref", nil, 0)
	started := time.Now().Add(-time.Second)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: updateConfig(b, `  version  = "v1.37.3"
  infrastructure_machine_spec_patch = jsonencode({ size = "large" })
  fallback = "rolling"
`+extensionsHCL(extOf("ref", srv))),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(updateRes, tfjsonpath.New("plan").AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"strategy": knownvalue.StringExact("rolling"), "uncovered_fields": strs("infrastructureMachine spec.size"),
				})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(updateRes, tfjsonpath.New("status"), knownvalue.MapExact(map[string]knownvalue.Check{
					b.machines[0]: knownvalue.StringExact("rollout-requested"), b.machines[1]: knownvalue.StringExact("rollout-requested"),
				})),
			},
			Check: func(*terraform.State) error {
				md := b.get(t, mdGVK, b.cluster+"-md")
				after, _, _ := unstructured.NestedString(md.Object, "spec", "rollout", "after")
				at, err := time.Parse(time.RFC3339, after)
				if err != nil || at.Before(started.Truncate(time.Second)) {
					return fmt.Errorf("MachineDeployment spec.rollout.after = %q, want a time after %s", after, started)
				}
				if v, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "version"); v != "v1.37.3" {
					return fmt.Errorf("MachineDeployment template version %s", v)
				}
				if n := srv.Calls()["UpdateMachine"]; n != 0 {
					return fmt.Errorf("UpdateMachine called %d times for machines to be replaced", n)
				}
				return nil
			},
			// No CAPI controller replaces the machines in the test bed, so they still differ.
			ExpectNonEmptyPlan: true,
		}},
	})
}

// An extension failing on the second machine stops the run naming it; the first machine stays
// updated (no rollback in place) and the third is never touched.
func TestAccInplaceUpdate_failureStops(t *testing.T) {
	b := newBed(t, 3)
	srv := b.extension(t, "ref", nil, 0)
	srv.FailMachine(b.f.Namespace, b.machines[1], "firmware refused the update")
	const version = "v1.37.4"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      updateConfig(b, fmt.Sprintf("  version = %q\n  update_limit = 1\n", version)+extensionsHCL(extOf("ref", srv))),
			ExpectError: regexp.MustCompile(`(?s)In-Place Update Failed.*1 machine\(s\) updated, 1 not started.*machine\s+` + b.machines[1] + `.*firmware\s+refused\s+the\s+update`),
		}},
	})
	if got := b.kubelet(t, "kwok-node-0"); got != version {
		t.Errorf("kwok-node-0 reports %s, want %s (updated before the failure)", got, version)
	}
	for i := 1; i < 3; i++ {
		if got := b.kubelet(t, fmt.Sprintf("kwok-node-%d", i)); got != testbed.KubeletVersion {
			t.Errorf("kwok-node-%d reports %s, want it untouched (%s)", i, got, testbed.KubeletVersion)
		}
	}
	if a := b.get(t, machineGVK, b.machines[1]).GetAnnotations(); a[live.AnnotationState] != live.StateFailed {
		t.Errorf("failed machine annotations %v", a)
	}
	third := b.get(t, machineGVK, b.machines[2])
	if _, ok := third.GetAnnotations()[live.AnnotationRevision]; ok {
		t.Errorf("third machine was marked: %v", third.GetAnnotations())
	}
	if v, _, _ := unstructured.NestedString(third.Object, "spec", "version"); v != testbed.KubeletVersion {
		t.Errorf("third machine spec.version %s", v)
	}
	if got := srv.Finished(); len(got) != 1 || got[0] != b.f.Namespace+"/"+b.machines[0] {
		t.Errorf("extension finished %v, want only %s", got, b.machines[0])
	}
}
