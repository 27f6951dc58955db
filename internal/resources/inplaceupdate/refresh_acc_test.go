package inplaceupdate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/live"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// patchMachine merge-patches a Machine of the bed (as someone outside Terraform would).
func (b *bed) patchMachine(t *testing.T, name string, patch map[string]any) {
	t.Helper()
	mc, err := b.f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(machineGVK)
	u.SetNamespace(b.f.Namespace)
	u.SetName(name)
	if err := mc.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, raw)); err != nil {
		t.Fatalf("patch machine %s: %v", name, err)
	}
}

func (b *bed) deleteMachine(t *testing.T, name string) {
	t.Helper()
	mc, err := b.f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(machineGVK)
	u.SetNamespace(b.f.Namespace)
	u.SetName(name)
	if err := mc.Delete(context.Background(), u); err != nil {
		t.Fatalf("delete machine %s: %v", name, err)
	}
}

func statusIs(want map[string]string) statecheck.StateCheck {
	checks := map[string]knownvalue.Check{}
	for k, v := range want {
		checks[k] = knownvalue.StringExact(v)
	}
	return statecheck.ExpectKnownValue(updateRes, tfjsonpath.New("status"), knownvalue.MapExact(checks))
}

// A refresh reads status from the Machines: one whose spec.version is edited back shows as
// drifted and the next plan updates it again; a deleted Machine drops out; after the re-apply
// the plan is empty.
func TestAccInplaceUpdate_refresh(t *testing.T) {
	b := newBed(t, 3)
	srv := b.extension(t, "ref", nil, 0)
	const version = "v1.37.1"
	cfg := updateConfig(b, fmt.Sprintf("  version = %q\n  update_limit = 3\n", version)+extensionsHCL(extOf("ref", srv)))
	m0, m1, m2 := b.machines[0], b.machines[1], b.machines[2]
	var updates int
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:            cfg,
				ConfigStateChecks: []statecheck.StateCheck{statusIs(map[string]string{m0: "updated", m1: "updated", m2: "updated"})},
			},
			{
				// Changed outside Terraform: the refreshed state shows it.
				PreConfig: func() {
					b.patchMachine(t, m0, map[string]any{"spec": map[string]any{"version": testbed.KubeletVersion}})
					b.deleteMachine(t, m2)
					updates = srv.Calls()["UpdateMachine"]
				},
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
				Check: func(s *terraform.State) error {
					a := s.RootModule().Resources[updateRes].Primary.Attributes
					if a["status.%"] != "2" || a["status."+m0] != "drifted" || a["status."+m1] != "updated" {
						return fmt.Errorf("refreshed status %s=%q %s=%q (%s machines), want drifted, updated and the deleted one dropped",
							m0, a["status."+m0], m1, a["status."+m1], a["status.%"])
					}
					if n := a["plan.#"]; n != "2" {
						return fmt.Errorf("refreshed plan has %s machines, want 2 (the deleted one dropped)", n)
					}
					return nil
				},
			},
			{
				// The next plan updates the drifted machine again, and only it.
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(updateRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(updateRes, tfjsonpath.New("plan"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(m0), "strategy": knownvalue.StringExact("in-place")}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(m1), "strategy": knownvalue.StringExact("unchanged")}),
					})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{statusIs(map[string]string{m0: "updated", m1: "unchanged"})},
				Check: func(*terraform.State) error {
					if v, _, _ := unstructured.NestedString(b.get(t, machineGVK, m0).Object, "spec", "version"); v != version {
						return fmt.Errorf("machine %s spec.version %s, want %s", m0, v, version)
					}
					if n := srv.Calls()["UpdateMachine"] - updates; n < 1 {
						return fmt.Errorf("the drifted machine was not updated (%d UpdateMachine calls)", n)
					}
					return nil
				},
			},
			{
				// State and plan agree: nothing to do.
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(updateRes, plancheck.ResourceActionNoop),
				}},
			},
		},
	})
}

// Import by namespace/cluster/machine_deployment restores the version, revision and status
// from the Machines; the extensions (CA bundle) and the plan-time plan cannot be restored.
func TestAccInplaceUpdate_import(t *testing.T) {
	b := newBed(t, 2)
	srv := b.extension(t, "ref", nil, 0)
	const version = "v1.37.2"
	cfg := updateConfig(b, fmt.Sprintf("  version = %q\n  update_limit = 2\n", version)+extensionsHCL(extOf("ref", srv)))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: cfg},
			{
				Config:                               cfg,
				ResourceName:                         updateRes,
				ImportState:                          true,
				ImportStateId:                        b.f.Namespace + "/" + b.cluster + "/" + b.cluster + "-md",
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				ImportStateVerifyIgnore:              []string{"extensions", "plan", "timeouts", "verify", "update_limit"},
			},
			{
				Config:        cfg,
				ResourceName:  updateRes,
				ImportState:   true,
				ImportStateId: b.f.Namespace + "/" + b.cluster,
				ExpectError:   regexp.MustCompile(`Invalid Import ID`),
			},
		},
	})
}

// A machine left `updating` by an interrupted run, its specs already written, is resumed by
// the next apply: UpdateMachine is called again and the machine verified.
func TestAccInplaceUpdate_resume(t *testing.T) {
	b := newBed(t, 2)
	srv := b.extension(t, "ref", nil, 0)
	const version = "v1.37.5"
	revision := live.Revision(inplace.Change{Version: version})
	m0, m1 := b.machines[0], b.machines[1]
	// The interrupted run marked m0 updating and wrote its spec; its Node was never updated.
	b.patchMachine(t, m0, map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{live.AnnotationRevision: revision, live.AnnotationState: live.StateUpdating}},
		"spec":     map[string]any{"version": version},
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: updateConfig(b, fmt.Sprintf("  version = %q\n  update_limit = 1\n", version)+extensionsHCL(extOf("ref", srv))),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(updateRes, tfjsonpath.New("plan").AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"name": knownvalue.StringExact(m0), "strategy": knownvalue.StringExact("in-place"), "extensions": strs("ref"),
					"changed_fields": knownvalue.ListExact([]knownvalue.Check{}),
				})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{statusIs(map[string]string{m0: "updated", m1: "updated"})},
			Check: func(*terraform.State) error {
				for i, m := range b.machines {
					if got := b.kubelet(t, fmt.Sprintf("kwok-node-%d", i)); got != version {
						return fmt.Errorf("kwok-node-%d reports kubelet %s, want %s", i, got, version)
					}
					if a := b.get(t, machineGVK, m).GetAnnotations(); a[live.AnnotationState] != live.StateDone || a[live.AnnotationRevision] != revision {
						return fmt.Errorf("machine %s annotations %v", m, a)
					}
				}
				if !slices.Contains(srv.Finished(), b.f.Namespace+"/"+m0) {
					return fmt.Errorf("the interrupted machine was not resumed through the extension: finished %v", srv.Finished())
				}
				return nil
			},
		}},
	})
}
