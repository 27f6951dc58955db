//go:build unix

package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// Records missing are "unknown", not "nothing" (delivery.StateRecordsMissing): the record
// namespace is deleted from one cluster (a cleanup) while v1 runs there, then a failing
// revision is applied. That cluster is shown records-missing in the refreshed `attention`,
// left out of the waves and held back, so what ran before is still there; the other cluster
// fails and is restored as usual. Then `adopt = true`, written in the configuration, takes the
// objects over and records the cluster again. Not pinned to one lane: the plan is what a CLI
// shows, on both.
func TestAccRollout_recordsMissingAreUnknown(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the engine makes of lost records, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("lostrec")
	// Its own record namespace, so that deleting it touches no other test's records.
	recordNS := name + "-records"
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", true, "only-in-v2")
	rev1 := revisionOf(t, v1)
	extra := fmt.Sprintf("update_limit = \"1\"\n  record_namespace = %q", recordNS)
	targets := `clusters = ["prod-eu-1", "prod-us-1"]`
	t.Cleanup(func() {
		// Destroy gives adopted objects back rather than deleting them (step 3 adopted them).
		_ = workloadClient(t, f, "prod-eu-1").Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return expectConfigMap(f, "prod-us-1", name, "settings", false)
		},
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, targets, v1, extra)},
			{
				PreConfig: func() { deleteRecordNamespace(t, f, "prod-eu-1", recordNS) },
				Config:    rolloutConfig(f, name, targets, v2, extra),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// The refresh before the plan found v1's ConfigMap and Deployment under the
					// rollout's field manager on a cluster without records (its Namespace is applied
					// under another manager and is no evidence); the waves leave it out.
					attentionBefore{cluster: "prod-eu-1", want: []string{
						"records missing: holds 2 objects of this rollout, e.g. ConfigMap " + name + "/settings", "held back", "adopt = true"}},
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*prod-us-1.*Deployment`),
			},
			{
				// What ran before is still there on prod-eu-1, untouched by v2 and not restored to
				// nothing; prod-us-1 failed and is back on v1.
				PreConfig: func() {
					if err := expectDeployment(f, []string{"prod-eu-1", "prod-us-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
					for _, c := range []string{"prod-eu-1", "prod-us-1"} {
						if err := expectConfigMap(f, c, name, "only-in-v2", false); err != nil {
							t.Fatal(err)
						}
					}
					if err := expectConfigMap(f, "prod-eu-1", name, "settings", true); err != nil {
						t.Fatal(err)
					}
					if st := recordsIn(t, f, "prod-eu-1", recordNS, name); st.Current != nil || st.Provisioning != nil || len(st.Invalid) != 0 {
						t.Fatalf("prod-eu-1 records %+v: want none written while it was held back", st)
					}
				},
				// The opt-in: adopt = true written takes v1's objects over as pre-existing.
				Config: rolloutConfig(f, name, targets, v1, extra+"\n  adopt = true"),
				Check: func(*terraform.State) error {
					st := recordsIn(t, f, "prod-eu-1", recordNS, name)
					if st.Current == nil || st.Current.Revision != rev1 || len(st.Current.Adopted) != 3 {
						return fmt.Errorf("prod-eu-1 records %+v: want current on v1 with its 3 objects adopted", st.Current)
					}
					return expectDeployment(f, []string{"prod-eu-1"}, name, "v1", true)
				},
			},
		},
	})
}

// deleteRecordNamespace deletes ns from cluster, as a cleanup would, and waits until it is gone.
func deleteRecordNamespace(t *testing.T, f *testbed.Fleet, cluster, ns string) {
	t.Helper()
	c := workloadClient(t, f, cluster)
	ctx := context.Background()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("delete namespace %s on %s: %v", ns, cluster, err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s on %s still there after 90s (err %v)", ns, cluster, err)
		}
		time.Sleep(time.Second)
	}
}

// recordsIn reads the rollout's records on cluster from the record namespace ns.
func recordsIn(t *testing.T, f *testbed.Fleet, cluster, ns, name string) *records.State {
	t.Helper()
	st, err := records.NewWorkloadStore(workloadClient(t, f, cluster), ns).Load(context.Background(),
		records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAccRollout_fluxContract_recordsMissingAreUnknown: the same through Flux, where a cluster's
// records are kept in the management cluster's record namespace (delivery.FluxRecordKey): those
// of prod-eu-1 are deleted there (a cleanup of Secrets) while v1 runs on it, and its
// Kustomization, still pinned to v1, says what runs there. prod-eu-1 is records-missing, held
// back and left out of the waves, so Flux keeps running v1 there (a restore to nothing would
// delete the Kustomization, and Flux would prune the app); prod-us-1 fails and is re-pinned to
// v1. Then `adopt = true` records prod-eu-1 again.
func TestAccRollout_fluxContract_recordsMissingAreUnknown(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the engine makes of lost records, not how a CLI drives it
	e := fluxEngine
	f := e.fleet(t)
	name := acctest.UniqueLabel("lostrec")
	recordNS := name + "-records"
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", true, "only-in-v2")
	rev1 := e.revision(t, f, name, v1)
	extra := e.withDelivery(f, name, fmt.Sprintf("update_limit = \"1\"\n  record_namespace = %q", recordNS))
	both := []string{"prod-eu-1", "prod-us-1"}
	targets := `clusters = ["prod-eu-1", "prod-us-1"]`
	var pinned map[string]string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: rolloutConfig(f, name, targets, v1, extra)},
			{
				PreConfig: func() {
					pinned = acctest.FluxPins(t, f, key, both)
					deleteFluxRecords(t, f, recordNS, delivery.FluxRecordKey(key, "prod-eu-1"))
				},
				Config: rolloutConfig(f, name, targets, v2, extra),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					attentionBefore{cluster: "prod-eu-1", want: []string{"records missing", "held back", "adopt = true"}},
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*prod-us-1`),
			},
			{
				// prod-eu-1 still runs v1, pinned as before (never re-pinned, never let go of);
				// prod-us-1 failed and is back on v1.
				PreConfig: func() {
					if err := expectDeployment(f, both, name, "v1", true); err != nil {
						t.Fatal(err)
					}
					for _, c := range both {
						if err := expectConfigMap(f, c, name, "only-in-v2", false); err != nil {
							t.Fatal(err)
						}
					}
					// prod-us-1's restore re-pins v1 from its records (an artifact tagged of its own);
					// prod-eu-1 was never re-pinned at all.
					if now := acctest.FluxPins(t, f, key, both); now["prod-eu-1"] != pinned["prod-eu-1"] {
						t.Fatalf("prod-eu-1 pinned to %s after the failed apply, want %s (v1, never re-pinned)", now["prod-eu-1"], pinned["prod-eu-1"])
					}
					st, err := e.records(t, f, "prod-eu-1", recordNS, key)
					if err != nil {
						t.Fatal(err)
					}
					if st.Current != nil || st.Provisioning != nil || len(st.Invalid) != 0 {
						t.Fatalf("prod-eu-1 records %+v: want none written while it was held back", st)
					}
				},
				Config: rolloutConfig(f, name, targets, v1, extra+"\n  adopt = true"),
				Check: func(*terraform.State) error {
					st, err := e.records(t, f, "prod-eu-1", recordNS, key)
					if err != nil {
						return err
					}
					if st.Current == nil || st.Current.Revision != rev1 || st.Provisioning != nil {
						return fmt.Errorf("prod-eu-1 records %+v: want current on v1", st)
					}
					return expectDeployment(f, both, name, "v1", true)
				},
			},
		},
	})
}

// deleteFluxRecords deletes the record Secrets of key in the management cluster's record
// namespace ns, as a cleanup would.
func deleteFluxRecords(t *testing.T, f *testbed.Fleet, ns string, key records.Key) {
	t.Helper()
	mc := managementClient(t, f)
	var secrets corev1.SecretList
	if err := mc.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range secrets.Items {
		if secrets.Items[i].Annotations[records.AnnotationRolloutKey] == key.String() {
			if err := mc.Delete(context.Background(), &secrets.Items[i]); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no record of %s in %s to delete", key, ns)
	}
}
