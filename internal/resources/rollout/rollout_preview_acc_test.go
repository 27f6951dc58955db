package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// A ValidatingAdmissionPolicy in the canary cluster rejects the bundle's ConfigMap: the plan's
// dry-run preview fails the plan naming the cluster, the object and the policy's message, and
// nothing is written (no object, no record anywhere). With the policy removed, the plan shows
// what the canary would do, in counts.
func TestAccRollout_previewRejects(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider asks the fleet at plan time, not how a CLI drives it
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("preview")
	const canary = "prod-eu-1"
	// In namespace default, which exists, so the dry-run reaches admission (an object in a
	// namespace the bundle brings is counted created without the server's word).
	bundle := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {setting: v1}\n", name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	wc, err := f.WorkloadClient(canary)
	if err != nil {
		t.Fatal(err)
	}
	removePolicy := acctest.DenyConfigMap(t, wc, name)

	tf.writeConfig(blastConfig(f, name, `clusters = ["prod-eu-1", "staging-eu-1"]`+"\n  canary = [\"prod-eu-1\"]", bundle, ""))
	out := strings.Join(strings.Fields(tf.mustRun(ctx, 1, "plan")), " ")
	want := regexp.MustCompile(`Manifests Rejected By The API Server.*` + canary + `: ConfigMap default/` + name + `: .*` + regexp.QuoteMeta(acctest.DeniedMessage(name)))
	if !want.MatchString(out) {
		t.Fatalf("plan output lacks %q:\n%s", want, out)
	}
	for _, cluster := range []string{canary, "staging-eu-1"} {
		if err := expectConfigMap(f, cluster, "default", name, false); err != nil {
			t.Error(err)
		}
		if st := workloadRecords(t, f, cluster, name); st.Current != nil || st.Provisioning != nil || len(st.Invalid)+len(st.Superseded) > 0 {
			t.Errorf("%s: records written by a refused plan: %+v", cluster, st)
		}
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger written by a refused plan: %+v", ledger)
	}

	removePolicy()
	// The CLI wraps warnings at its width: compare with white space collapsed.
	out = strings.Join(strings.Fields(tf.mustRun(ctx, 0, "plan")), " ")
	// The canary alone is dry-run (preview = "canary", the default).
	for _, s := range []string{"Dry-Run Preview", `(preview = "canary", time budget 30s): 1 of 1 clusters previewed`,
		canary + ": 1 created, 0 changed, 0 unchanged, 0 conflicting"} {
		if !strings.Contains(out, s) {
			t.Fatalf("plan output lacks %q:\n%s", s, out)
		}
	}
}
