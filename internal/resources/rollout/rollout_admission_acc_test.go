package rollout_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// A revision the canary's admission refuses (a ValidatingAdmissionPolicy that denies a
// ConfigMap only this revision brings) fails on the canary alone: the canary is restored to the
// previous revision (delivering directly, its objects put back; through Flux, its Kustomization
// re-pinned after kustomize-controller's dry-run was refused), the revision is recorded invalid
// there with the policy's words as the reason, the other clusters never get it, and the next
// plan refuses it. preview = "none" on both engines, so that the refusal meets the apply (a
// plan's dry-run would refuse it first when delivering directly; Flux previews nothing).
func TestAccRollout_admissionRefusedRevision(t *testing.T) {
	acctest.OnOneLane(t, 0)
	testAdmissionRefusedRevision(t, directEngine)
}

// TestAccRollout_fluxContract_admissionRefusedRevision: the same through Flux.
func TestAccRollout_fluxContract_admissionRefusedRevision(t *testing.T) {
	acctest.OnOneLane(t, 0) // the verdict through Flux, not how a CLI drives the provider
	testAdmissionRefusedRevision(t, fluxEngine)
}

func testAdmissionRefusedRevision(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("admit")
	denied := name + "-denied"
	const canary = "prod-eu-1"
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, denied)
	rev1, rev2 := e.revision(t, f, name, v1), e.revision(t, f, name, v2)
	extra := e.withDelivery(f, name, `canary = ["`+canary+`"]`+"\n  preview = \"none\"")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, allThree, v1, extra)},
			{
				PreConfig: func() { acctest.DenyConfigMap(t, workloadClient(t, f, canary), denied) },
				Config:    rolloutConfig(f, name, allThree, v2, extra),
				// terraform-plugin-testing runs no Check on a step that expects an error: what
				// the failed apply left is checked by the next step's PreConfig, before it plans.
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*` + canary),
			},
			{
				PreConfig: func() {
					if err := admissionRefusedLeft(t, e, f, key, canary, clusters, rev1, rev2, denied); err != nil {
						t.Fatal(err)
					}
				},
				Config:      rolloutConfig(f, name, allThree, v2, extra),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*` + canary),
			},
			{
				// Back to v1: nothing to do on any cluster, and the ledger keeps v2.
				Config: rolloutConfig(f, name, allThree, v1, extra),
				Check: func(*terraform.State) error {
					return admissionRefusedLeft(t, e, f, key, canary, clusters, rev1, rev2, denied)
				},
			},
		},
	})
}

// admissionRefusedLeft checks what a revision rev2 that canary's admission refused leaves: every
// cluster on rev1 (objects and records, nothing in flight), the denied ConfigMap nowhere, and
// rev2 in the ledger as failed on canary alone, for the policy's reason.
func admissionRefusedLeft(t *testing.T, e engineUnderTest, f *testbed.Fleet, key records.Key, canary string, clusters []string, rev1, rev2, denied string) error {
	if err := expectDeployment(f, clusters, key.Name, "v1", true); err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	for _, c := range clusters {
		if err := expectConfigMap(f, c, key.Name, denied, false); err != nil {
			return err
		}
		st, err := e.records(t, f, c, records.DefaultNamespace, key)
		if err != nil {
			return err
		}
		if st.Provisioning != nil || st.Current == nil || st.Current.Revision != rev1 {
			return fmt.Errorf("%s: records %+v, want current %s and nothing in flight", c, st, rev1)
		}
	}
	ledger := ledgerOf(t, f, key.Name)
	if len(ledger) != 1 || ledger[0].Revision != rev2 || strings.Join(ledger[0].Clusters, ",") != canary {
		return fmt.Errorf("ledger %+v, want %s failed on %s", ledger, rev2, canary)
	}
	if !strings.Contains(ledger[0].Reason, acctest.DeniedMessage(denied)) {
		return fmt.Errorf("ledger reason %q, want the policy's %q", ledger[0].Reason, acctest.DeniedMessage(denied))
	}
	return nil
}
