package rollout_test

import (
	"archive/zip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// These tests cover what a rollout may touch and show (issue 11): targets that say what they
// mean, canaries that cannot be skipped silently, Secrets never on screen, and destructive plans
// that say what they delete. Their bundles are a Namespace and a ConfigMap, ready at once.

func lightBundle(ns, setting string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %[1]s}\ndata: {setting: %[2]q}\n", ns, setting)
}

// blastConfig renders a rollout for the CLI tests; extra holds further attributes.
func blastConfig(f *testbed.Fleet, name, targets, manifests, extra string) string {
	return `terraform {
  required_providers {
    gradual = { source = "gradual-dev/gradual" }
  }
}

` + acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "test" {
  name      = %q
  namespace = %q
  %s
  manifests = <<-EOT
%s  EOT
  verify = { timeout = "60s" }
  %s
}
`, name, f.Namespace, targets, indent(manifests), extra)
}

// A listed canary that is not ready: the plan fails naming it and why, unless canary_optional;
// and a canary that goes not ready between plan and apply stops the apply before it changes
// anything, instead of sending the first wave to the fleet.
func TestAccRollout_canaryMustLead(t *testing.T) {
	acctest.OnOneLane(t, 1) // the provider's canary rule, not how a CLI drives it
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("canary")
	targets := `clusters = ["prod-us-1", "staging-eu-1"]` + "\n  canary = [\"prod-us-1\"]"
	v1, v2 := lightBundle(name, "v1"), lightBundle(name, "v2")
	rev1 := revisionOf(t, v1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		_ = f.SetReady(context.Background(), "prod-us-1", true)
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})

	setReady(t, f, "prod-us-1", false)
	tf.writeConfig(blastConfig(f, name, targets, v1, ""))
	out := tf.mustRun(ctx, 1, "plan")
	if !regexp.MustCompile(`(?s)Canary Not In The First Wave.*prod-us-1: skip: .{0,80}not`).MatchString(flat(out)) {
		t.Fatalf("the plan does not name the canary and why:\n%s", out)
	}

	// Optional: the rollout goes ahead without it.
	tf.writeConfig(blastConfig(f, name, targets, v1, "canary_optional = true"))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	if recs := workloadRecords(t, f, "staging-eu-1", name); recs.Current == nil || recs.Current.Revision != rev1 {
		t.Fatalf("staging-eu-1 records %s, want current %s", revOf(recs.Current), rev1)
	}
	if recs := workloadRecords(t, f, "prod-us-1", name); recs.Current != nil {
		t.Fatalf("prod-us-1 (not ready) got %s", revOf(recs.Current))
	}

	// The canary is ready when the plan is made, not when it is applied.
	setReady(t, f, "prod-us-1", true)
	tf.writeConfig(blastConfig(f, name, targets, v2, ""))
	planOut := tf.mustRun(ctx, 2, "plan", "-detailed-exitcode", "-out=v2.tfplan")
	if got := tf.planChange(ctx, "v2.tfplan", "gradual_rollout.test").After.Waves; got != "2 waves: 1 canary wave of 1 cluster, then 1 wave of 1 cluster" {
		t.Fatalf("planned waves %q, want the canary, then staging-eu-1", got)
	}
	if err := expectWaveClusters(planOut, "prod-us-1", "staging-eu-1"); err != nil {
		t.Fatalf("want the canary first: %v", err)
	}
	setReady(t, f, "prod-us-1", false)
	out = tf.mustRun(ctx, 1, "apply", "-input=false", "v2.tfplan")
	if !regexp.MustCompile(`(?s)Canary Not Available.*prod-us-1.*nothing was applied`).MatchString(flat(out)) {
		t.Fatalf("apply does not refuse the missing canary:\n%s", out)
	}
	if recs := workloadRecords(t, f, "staging-eu-1", name); recs.Current == nil || recs.Current.Revision != rev1 || recs.Provisioning != nil {
		t.Fatalf("staging-eu-1 was touched: current %s provisioning %s, want %s", revOf(recs.Current), revOf(recs.Provisioning), rev1)
	}
}

// A Secret goes in sensitive_manifests: its value reaches the cluster, yet appears nowhere
// Terraform shows or keeps — plan and apply output, the saved plan, the state (show -json and
// the state file) and the provider's logs (TRACE) — and a new value still plans an update.
func TestAccRollout_secretNeverShown(t *testing.T) {
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("secret")
	targets := `clusters = ["staging-eu-1"]`
	secret := func(value string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: %q}\n", name, value)
	}
	// As a user should: the Secret comes from a file (or an ephemeral value), not a literal in
	// the configuration, which Terraform itself copies into saved plans.
	config := func(value string) string {
		if err := os.WriteFile(filepath.Join(tf.dir, "secret.yaml"), []byte(secret(value)), 0o600); err != nil {
			t.Fatal(err)
		}
		return blastConfig(f, name, targets, lightBundle(name, "v1"), `sensitive_manifests = file("${path.module}/secret.yaml")`)
	}
	one, two := "s3cr3t-one-"+name, "s3cr3t-two-"+name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	// Each value also as base64, as a Secret's data holds it.
	leaks := func(where, text string, values ...string) {
		t.Helper()
		for _, v := range values {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
				if strings.Contains(text, form) {
					t.Errorf("%s shows the Secret value %q", where, form)
				}
			}
		}
	}
	run := func(want int, args ...string) (output, log string) {
		t.Helper()
		p := tf.start(true, args...)
		res := p.wait(t, 5*time.Minute)
		logText, _ := os.ReadFile(p.logPath)
		if res.code != want {
			t.Fatalf("%s exited %d, want %d:\n%s", strings.Join(args, " "), res.code, want, res.output)
		}
		if len(logText) == 0 {
			t.Fatalf("%s wrote no TRACE log", args[0])
		}
		return res.output, string(logText)
	}

	// A Secret in manifests is refused, naming the attribute to use, before anything is applied.
	tf.writeConfig(blastConfig(f, name, targets, lightBundle(name, "v1")+"---\n"+secret(one), ""))
	out := tf.mustRun(ctx, 1, "plan")
	if !regexp.MustCompile(`(?s)Secret In Manifests.*Secret ` + name + `/db.*sensitive_manifests`).MatchString(flat(out)) {
		t.Fatalf("a Secret in manifests was not refused as such:\n%s", out)
	}
	leaks("the refusal", out, one)

	tf.writeConfig(config(one))
	out, log := run(0, "plan", "-out=one.tfplan")
	leaks("plan output", out, one)
	leaks("the plan's TRACE log", log, one)
	leaks("the saved plan file", planFileText(t, filepath.Join(tf.dir, "one.tfplan")), one)
	var planJSON map[string]any
	tf.showJSON(ctx, &planJSON, "one.tfplan")
	leaks("show -json of the plan", fmt.Sprint(planJSON), one)

	out, log = run(0, "apply", "-input=false", "one.tfplan")
	leaks("apply output", out, one)
	leaks("the apply's TRACE log", log, one)
	expectSecret(t, f, "staging-eu-1", name, one) // the value was there to leak
	stateFile, err := os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	leaks("the state file", string(stateFile), one)
	if !strings.Contains(string(stateFile), "/Secret "+name+"/db") {
		t.Errorf("sensitive_objects does not name the Secret:\n%s", stateFile)
	}
	var state map[string]any
	tf.showJSON(ctx, &state)
	leaks("show -json", fmt.Sprint(state), one)
	rev1 := tf.stateValues(ctx, "gradual_rollout.test").Revision

	// A new value: an update (the revision covers it), still never shown.
	tf.writeConfig(config(two))
	out, log = run(2, "plan", "-detailed-exitcode", "-out=two.tfplan")
	leaks("the second plan", out+log, one, two)
	change := tf.planChange(ctx, "two.tfplan", "gradual_rollout.test")
	if change.After.Revision == "" || change.After.Revision == rev1 {
		t.Fatalf("a changed Secret value planned revision %q (was %q)", change.After.Revision, rev1)
	}
	out, log = run(0, "apply", "-input=false", "two.tfplan")
	leaks("the second apply", out+log, one, two)
	expectSecret(t, f, "staging-eu-1", name, two)
	stateFile, _ = os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	leaks("the state file", string(stateFile), one, two)

	// Refresh and a plan with nothing to do: the records carry the Secret, the state does not.
	tf.mustRun(ctx, 0, "plan", "-detailed-exitcode")

	// Import restores the rollout from the management cluster's record, which never held the
	// sensitive half: the revision comes back as it was, so the plan (with sensitive_manifests
	// set again in the configuration) has nothing to do.
	rev2 := tf.stateValues(ctx, "gradual_rollout.test").Revision
	// The state holds this one resource: forgetting it is removing the file.
	if err := os.Remove(filepath.Join(tf.dir, "terraform.tfstate")); err != nil {
		t.Fatal(err)
	}
	out, log = run(0, "import", "gradual_rollout.test", f.Namespace+"/"+name)
	leaks("import", out+log, one, two)
	if got := tf.stateValues(ctx, "gradual_rollout.test").Revision; got != rev2 {
		t.Errorf("imported revision %q, want %q", got, rev2)
	}
	stateFile, _ = os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	leaks("the imported state file", string(stateFile), one, two)
	tf.mustRun(ctx, 0, "plan", "-detailed-exitcode")
}

// planFileText is every entry of a saved plan (a zip archive: the plan, the prior state, a
// snapshot of the configuration), uncompressed, so that a value in any of them is found.
func planFileText(t *testing.T, path string) string {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var b strings.Builder
	for _, entry := range r.File {
		rc, err := entry.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	if b.Len() == 0 {
		t.Fatalf("%s holds nothing", path)
	}
	return b.String()
}

func expectSecret(t *testing.T, f *testbed.Fleet, cluster, ns, value string) {
	t.Helper()
	var s corev1.Secret
	if err := workloadClient(t, f, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db"}, &s); err != nil {
		t.Fatalf("%s: Secret %s/db: %v", cluster, ns, err)
	}
	if got := string(s.Data["password"]); got != value {
		t.Fatalf("%s: Secret %s/db holds %q, want %q", cluster, ns, got, value)
	}
}

// Renaming a rollout replaces it, and destroying it deletes from every cluster: both plans say
// how many objects leave how many clusters.
func TestAccRollout_destructivePlansWarn(t *testing.T) {
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("rename")
	targets := `clusters = ["prod-eu-1", "staging-eu-1"]`
	bundle := lightBundle(name, "v1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		tf.writeConfig(blastConfig(f, name, targets, bundle, ""))
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	tf.writeConfig(blastConfig(f, name, targets, bundle, ""))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	tf.writeConfig(blastConfig(f, name+"-b", targets, bundle, ""))
	out := tf.mustRun(ctx, 0, "plan")
	if !regexp.MustCompile(`(?s)Replacement Deletes From Clusters.*Changing name replaces rollout [^ ]+/` + name +
		`: destroying it will delete 4 object\(s\) from 2 cluster\(s\).*deletion_policy = "delete"`).MatchString(flat(out)) {
		t.Fatalf("the rename plan does not warn with the counts:\n%s", out)
	}
	// Destroy follows the deletion_policy in state, so it is applied first.
	tf.writeConfig(blastConfig(f, name, targets, bundle, `deletion_policy = "orphan"`))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	out = tf.mustRun(ctx, 0, "plan", "-destroy")
	if !regexp.MustCompile(`(?s)Destroy Deletes From Clusters.*will leave its 4 object\(s\) in 2 cluster\(s\).*deletion_policy = "orphan"`).MatchString(flat(out)) {
		t.Fatalf("the destroy plan does not warn with the counts:\n%s", out)
	}
	tf.writeConfig(blastConfig(f, name, targets, bundle, ""))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	out = tf.mustRun(ctx, 0, "plan", "-destroy")
	if !regexp.MustCompile(`(?s)Destroy Deletes From Clusters.*Destroying rollout [^ ]+/` + name + ` will delete 4 object\(s\) from 2 cluster\(s\)`).MatchString(flat(out)) {
		t.Fatalf("the destroy plan does not warn with the counts:\n%s", out)
	}
}

// clusters = [] is refused at plan (not read as "every Cluster"); so is a Secret in manifests.
func TestAccRollout_targetsSayWhatTheyMean(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("empty")
	bundle := lightBundle(name, "v1")
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProviderFactories, Steps: []resource.TestStep{
		{Config: rolloutConfig(f, name, `clusters = []`, bundle, ""), ExpectError: regexp.MustCompile(`No Clusters Listed`)},
		{Config: rolloutConfig(f, name, `clusters = [for c in ["a"] : c if c == "b"]`, bundle, ""), ExpectError: regexp.MustCompile(`No Clusters Listed`)},
	}})
	for _, c := range []string{"prod-eu-1", "prod-us-1", "staging-eu-1"} {
		if recs := workloadRecords(t, f, c, name); recs.Current != nil || recs.Provisioning != nil {
			t.Fatalf("%s got records of a refused plan", c)
		}
	}
}

// flat undoes the CLI's layout of diagnostics (the │ frame, lines wrapped to the terminal), so
// that a test can match a sentence wherever the CLI broke it.
func flat(out string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(out, "│", " ")), " ")
}
