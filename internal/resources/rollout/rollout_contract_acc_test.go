package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// The plan is the contract: these tests change the fleet between a saved plan and its apply, or
// run a revision that breaks the cluster it reaches, and check that apply does nothing
// destructive the plan did not show and stops when it can no longer tell.

// sideEffect is a plan check that does something between `plan -out` and `apply` of the saved
// plan (terraform-plugin-testing saves the plan whenever a step has PreApply checks).
type sideEffect func()

func (s sideEffect) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, _ *plancheck.CheckPlanResponse) {
	s()
}

// A saved plan applied after a Cluster left the selector deletes nothing from it: the plan did
// not list it in `leaving`, so apply leaves it alone (and out of the waves). The next plan lists
// it, and that apply lets go of it.
func TestAccRollout_savedPlanRelabelOutLeavesItAlone(t *testing.T) {
	testSavedPlanRelabelOut(t, directEngine)
}

// TestAccRollout_fluxContract_savedPlanRelabelOut: the same through Flux.
func TestAccRollout_fluxContract_savedPlanRelabelOut(t *testing.T) {
	testSavedPlanRelabelOut(t, fluxEngine)
}

func testSavedPlanRelabelOut(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("saved")
	label := name
	relabel := labeller(t, f, label)
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	for _, c := range clusters {
		relabel(c, true)
	}
	t.Cleanup(func() {
		for _, c := range clusters {
			relabel(c, false)
		}
	})
	targets := fmt.Sprintf(`selector = { match_labels = { %q = "yes" } }`, label)
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, targets, v1, e.withDelivery(f, name, ""))},
			{
				// plan -out: one wave of three, nobody leaving; then staging-eu-1 loses the label;
				// then apply the saved plan.
				Config: rolloutConfig(f, name, targets, v2, e.withDelivery(f, name, "")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("leaving"), knownvalue.ListSizeExact(0)),
					sideEffect(func() { relabel("staging-eu-1", false) }),
				}},
				// The refresh after apply finds staging-eu-1 leaving: the next plan lists it.
				ExpectNonEmptyPlan: true,
				Check: func(*terraform.State) error {
					// Not in the waves any more (not picked), and not deleted from either.
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", false); err != nil {
						return fmt.Errorf("a cluster no plan showed leaving lost the app: %w", err)
					}
					return expectDeployment(f, []string{"prod-eu-1", "prod-us-1"}, name, "v2", false)
				},
			},
			{
				// The next plan shows it leaving; its apply lets go of it.
				Config: rolloutConfig(f, name, targets, v2, e.withDelivery(f, name, "")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("leaving"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("staging-eu-1")})),
				}},
				Check: func(*terraform.State) error {
					return expectConfigMap(f, "staging-eu-1", name, "settings", false)
				},
			},
		},
	})
}

// A saved plan that lists a cluster leaving, applied after the cluster came back, leaves it be.
func TestAccRollout_savedPlanRelabelBackKeepsIt(t *testing.T) {
	testSavedPlanRelabelBack(t, directEngine)
}

// TestAccRollout_fluxContract_savedPlanRelabelBack: the same through Flux.
func TestAccRollout_fluxContract_savedPlanRelabelBack(t *testing.T) {
	testSavedPlanRelabelBack(t, fluxEngine)
}

func testSavedPlanRelabelBack(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("back")
	label := name
	relabel := labeller(t, f, label)
	relabel("prod-eu-1", true)
	relabel("staging-eu-1", true)
	t.Cleanup(func() { relabel("prod-eu-1", false); relabel("staging-eu-1", false) })
	targets := fmt.Sprintf(`selector = { match_labels = { %q = "yes" } }`, label)
	v1 := app(name, "v1", false, "")
	config := rolloutConfig(f, name, targets, v1, e.withDelivery(f, name, ""))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{
				// staging-eu-1 leaves before the plan (the refresh sees it), and comes back
				// between the plan and its apply: no inconsistent final plan, and it keeps the app.
				PreConfig: func() { relabel("staging-eu-1", false) },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("leaving"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("staging-eu-1")})),
					sideEffect(func() { relabel("staging-eu-1", true) }),
				}},
				Check: func(*terraform.State) error {
					return expectDeployment(f, []string{"prod-eu-1", "staging-eu-1"}, name, "v1", false)
				},
			},
		},
	})
}

// failClosedWebhook is a ValidatingWebhookConfiguration whose service does not exist, failing
// closed for ConfigMaps and Secrets in the namespaces given: the everyday shape of a broken
// policy engine. It is scoped to this test's namespaces so that the shared fleet's other tests
// are not blocked if a restore went wrong.
func failClosedWebhook(name string, namespaces ...string) string {
	return fmt.Sprintf(`---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[1]s-policy
webhooks:
  - name: policy.%[1]s.example.com
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 2
    clientConfig:
      service: {namespace: %[1]s, name: no-such-policy-engine, port: 443}
    namespaceSelector:
      matchExpressions:
        - {key: kubernetes.io/metadata.name, operator: In, values: [%[2]s]}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE", "DELETE"]
        resources: ["configmaps", "secrets"]
`, name, `"`+strings.Join(namespaces, `", "`)+`"`)
}

// webhookGone checks that no cluster holds the test's webhook configuration.
func webhookGone(f *testbed.Fleet, name string, clusters []string) error {
	for _, cluster := range clusters {
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind("ValidatingWebhookConfiguration")
		err = c.Get(context.Background(), client.ObjectKey{Name: name + "-policy"}, u)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: webhook configuration %s-policy still there (err %v)", cluster, name, err)
		}
	}
	return nil
}

// A revision that breaks the cluster's admission (a fail-closed webhook for Secrets and
// ConfigMaps, so the rollout's own records can no longer be written) reaches the first cluster
// only: it lost contact after the change, which halts the rollout (max_unsettled 0); it is
// restored (the webhook configuration deleted first), never recorded invalid; the apply fails;
// and the next plan refuses to take the revision further without retry_invalid.
func TestAccRollout_failClosedWebhookHaltsAtTheFirstCluster(t *testing.T) {
	acctest.OnOneLane(t, 1)
	testFailClosedWebhook(t, directEngine)
}

// TestAccRollout_fluxContract_failClosedWebhookHaltsAtTheFirstCluster: the same through Flux,
// where the records are in the management cluster and the webhook cannot block them: the
// revision's own ConfigMap meets it instead, in the reconcile the Flux engine asks for after the
// first (fluxdelivery/admission.go): a webhook that cannot be called is the infrastructure's by
// the API server's status reason, so the canary lost contact, as delivering directly. The
// restore pins the backup disarmed first, so that Flux prunes the webhook configuration before
// the backup's dry-runs meet it.
func TestAccRollout_fluxContract_failClosedWebhookHaltsAtTheFirstCluster(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the engine does to the fleet (about 2 minutes), as the direct test
	testFailClosedWebhook(t, fluxEngine)
}

func testFailClosedWebhook(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("webhook")
	recordNS := name + "-records"
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	v1 := app(name, "v1", false, "")
	v2 := v1 + failClosedWebhook(name, name, recordNS)
	extra := e.withDelivery(f, name, fmt.Sprintf("update_limit = \"1\"\n  canary = [\"prod-eu-1\"]\n  record_namespace = %q", recordNS))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return webhookGone(f, name, clusters)
		},
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, allThree, v1, extra)},
			{
				Config:      rolloutConfig(f, name, allThree, v2, extra),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*` + words("stopped answering after the change began, more than max_unsettled 0")),
			},
			{
				PreConfig: func() {
					if err := webhookGone(f, name, clusters); err != nil {
						t.Fatalf("the broken revision was not restored: %v", err)
					}
					// Restored, not to nothing: the app runs everywhere.
					if err := expectDeployment(f, clusters, name, "v1", false); err != nil {
						t.Fatalf("%s: %v", e.name, err)
					}
					// Only the canary was touched: the others never had the revision.
					for _, c := range clusters[1:] {
						state, err := e.records(t, f, c, recordNS, key)
						if err != nil {
							t.Fatal(err)
						}
						if state.Provisioning != nil || state.Current == nil || state.Current.Revision != e.revision(t, f, name, v1) {
							t.Fatalf("%s: records %+v, want current on v1 and nothing in flight", c, state)
						}
					}
					if mc, err := f.ManagementClient(); err != nil {
						t.Fatal(err)
					} else if ledger, err := records.NewManagementStore(mc, recordNS).Ledger(context.Background(), key); err != nil || len(ledger) != 0 {
						t.Fatalf("ledger %+v (%v): lost contact is not the revision's failure", ledger, err)
					}
				},
				Config:      rolloutConfig(f, name, allThree, v2, extra),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Clusters Lost Contact After This Revision.*prod-eu-1`),
			},
		},
	})
}

// A second state creating a rollout that another state manages (a copied workspace) is refused
// with the import command; the first keeps its app.
func TestAccRollout_secondStateCreateRefused(t *testing.T) {
	acctest.OnOneLane(t, 1)
	testSecondStateCreateRefused(t, directEngine)
}

// TestAccRollout_fluxContract_secondStateCreateRefused: the same through Flux.
func TestAccRollout_fluxContract_secondStateCreateRefused(t *testing.T) {
	testSecondStateCreateRefused(t, fluxEngine)
}

func testSecondStateCreateRefused(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("copy")
	v1 := app(name, "v1", false, "")
	one := rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, v1, e.withDelivery(f, name, ""))
	two := one + fmt.Sprintf(`
resource "gradual_rollout" "copy" {
  name      = %q
  namespace = %q
  clusters  = ["staging-eu-1"]
  manifests = gradual_rollout.test.manifests
  %s}
`, name, f.Namespace, e.delivery(f, name))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: one},
			{
				Config: two,
				// terraform-plugin-testing runs no Check on a step that expects an error: the
				// original's app is checked by the next step's PreConfig, before anything re-applies it.
				ExpectError: regexp.MustCompile(`(?s)Rollout Already Exists.*` + words("terraform import gradual_rollout.<name> "+f.Namespace+"/"+name)),
			},
			{
				// The original is untouched by the refused create: its app is still v1 (and its
				// records say so) before this step plans or applies anything.
				PreConfig: func() {
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", false); err != nil {
						t.Fatalf("after the refused create: %v", err)
					}
					state, err := e.records(t, f, "staging-eu-1", records.DefaultNamespace, records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name})
					if err != nil {
						t.Fatal(err)
					}
					if state.Provisioning != nil || state.Current == nil || state.Current.Revision != e.revision(t, f, name, v1) {
						t.Fatalf("after the refused create: records %+v, want current on v1 and nothing in flight", state)
					}
				},
				Config: one,
				Check: func(*terraform.State) error {
					return expectDeployment(f, []string{"staging-eu-1"}, name, "v1", false)
				},
			},
		},
	})
}

// A second state creating the rollout again with another record_namespace (a copied workspace
// whose record namespace was changed) finds no records there, but the rollout's objects in the
// cluster (delivering directly, under its field manager; through Flux, its Kustomization, which
// has the same name whatever the record namespace): the cluster is records-missing and held
// back, so the copy changes nothing there. Removing the copy (its destroy) leaves the original's
// app, records and, through Flux, its Kustomization as they were.
func TestAccRollout_secondStateOtherRecordNamespace(t *testing.T) {
	acctest.OnOneLane(t, 0)
	testSecondStateOtherRecordNamespace(t, directEngine)
}

// TestAccRollout_fluxContract_secondStateOtherRecordNamespace: the same through Flux.
func TestAccRollout_fluxContract_secondStateOtherRecordNamespace(t *testing.T) {
	testSecondStateOtherRecordNamespace(t, fluxEngine)
}

func testSecondStateOtherRecordNamespace(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	const cluster = "staging-eu-1"
	name := acctest.UniqueLabel("copyns")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	one := rolloutConfig(f, name, `clusters = ["`+cluster+`"]`, v1, e.withDelivery(f, name, ""))
	two := one + fmt.Sprintf(`
resource "gradual_rollout" "copy" {
  name             = %q
  namespace        = %q
  clusters         = [%q]
  record_namespace = "%s-records"
  manifests        = <<-EOT
%s  EOT
  %s}
`, name, f.Namespace, cluster, name, indent(v2), e.delivery(f, name))
	var before map[string]string
	// untouched checks that the original still runs v1 on cluster, as its records say, and
	// that nothing of it was written since before.
	untouched := func(*terraform.State) error {
		if err := expectDeployment(f, []string{cluster}, name, "v1", true); err != nil {
			return err
		}
		st, err := e.records(t, f, cluster, records.DefaultNamespace, key)
		if err != nil {
			return err
		}
		if st.Provisioning != nil || st.Current == nil || st.Current.Revision != e.revision(t, f, name, v1) {
			return fmt.Errorf("records %+v, want current on v1 and nothing in flight", st)
		}
		after := rolloutVersions(t, e, f, []string{cluster}, key)
		for obj, v := range before {
			if after[obj] != v {
				return fmt.Errorf("%s changed by the copy: resourceVersion %s → %q", obj, v, after[obj])
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: one, Check: func(*terraform.State) error {
				before = rolloutVersions(t, e, f, []string{cluster}, key)
				return nil
			}},
			{
				Config: two,
				// The copy still has the cluster to do, held back at every plan: delivering directly
				// the plan after shows that update again; through Flux it is empty. Either way
				// nothing is changed (untouched).
				ExpectNonEmptyPlan: e.name == directEngine.name,
				Check: func(s *terraform.State) error {
					// The copy says why it left the cluster alone: records missing.
					copied := s.RootModule().Resources["gradual_rollout.copy"]
					if copied == nil {
						return fmt.Errorf("no gradual_rollout.copy in state")
					}
					attention, skipped := copied.Primary.Attributes["attention."+cluster], copied.Primary.Attributes["skipped."+cluster]
					t.Logf("the copy: attention %q, skipped %q", attention, skipped)
					if !strings.HasPrefix(attention, "records missing") && !strings.HasPrefix(skipped, "records missing") {
						return fmt.Errorf("the copy's attention %q, skipped %q: want %s records-missing", attention, skipped, cluster)
					}
					return untouched(s)
				},
			},
			{Config: one, Check: untouched},
		},
	})
}
