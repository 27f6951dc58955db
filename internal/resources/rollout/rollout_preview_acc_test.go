package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

	// Once applied, the status data source dry-runs the next bundle on every cluster, for check
	// blocks and outputs, at plan time: with a policy on the canary refusing a ConfigMap the next
	// bundle adds, that one is rejected there (the policy's reason) and the changed one changes;
	// the other cluster would take both. Nothing is written.
	config := blastConfig(f, name, `clusters = ["prod-eu-1", "staging-eu-1"]`+"\n  canary = [\"prod-eu-1\"]", bundle, "")
	tf.writeConfig(config)
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	added := name + "-next"
	acctest.DenyConfigMap(t, wc, added) // removed at cleanup
	next := strings.Replace(bundle, "setting: v1", "setting: v2", 1) +
		fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {setting: v2}\n", added)
	tf.writeConfig(config + fmt.Sprintf(`
data "gradual_rollout_status" "next" {
  namespace         = %q
  name              = %q
  preview_manifests = <<-EOT
%s  EOT
}

output "previews" {
  value = { for c in data.gradual_rollout_status.next.clusters : c.name => c.preview }
}
`, f.Namespace, name, indent(next)))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	var previews map[string]struct {
		Created, Changed, Unchanged, Conflicting, Rejected int
		Rejections                                         []string
		NotPreviewed                                       string `json:"not_previewed"`
	}
	raw := tf.mustRun(ctx, 0, "output", "-json", "previews")
	if err := json.Unmarshal([]byte(raw), &previews); err != nil {
		t.Fatal(err)
	}
	t.Logf("previews: %s", strings.Join(strings.Fields(raw), " "))
	onCanary, other := previews[canary], previews["staging-eu-1"]
	if onCanary.Rejected != 1 || onCanary.Changed != 1 || onCanary.Created != 0 || len(onCanary.Rejections) != 1 ||
		!strings.Contains(onCanary.Rejections[0], "ConfigMap default/"+added) || !strings.Contains(onCanary.Rejections[0], acctest.DeniedMessage(added)) {
		t.Errorf("%s: preview %+v, want one ConfigMap changed and %s rejected with %q", canary, onCanary, added, acctest.DeniedMessage(added))
	}
	if other.Changed != 1 || other.Created != 1 || other.Rejected+other.Unchanged+other.Conflicting != 0 || other.NotPreviewed != "" {
		t.Errorf("staging-eu-1: preview %+v, want one ConfigMap changed and one created", other)
	}
	for _, cluster := range []string{canary, "staging-eu-1"} {
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &cm); err != nil || cm.Data["setting"] != "v1" {
			t.Errorf("%s: ConfigMap after the preview: %v, %v; want setting v1", cluster, cm.Data, err)
		}
	}
	if err := expectConfigMap(f, "staging-eu-1", "default", added, false); err != nil {
		t.Error(err)
	}
	tf.mustRun(ctx, 0, "destroy", "-auto-approve")
}
