package rollout_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// sensitive_paths makes a field of an ordinary kind as secret as a Secret's data: set in
// manifests, it is refused at plan time naming the object and the path (never the value); in
// sensitive_manifests the object is applied, and the value appears in no plan or apply output,
// saved plan, show -json, state file or TRACE log. The rules are part of the revision.
func TestAccRollout_sensitivePaths(t *testing.T) {
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("senspath")
	targets := `clusters = ["staging-eu-1"]`
	rules := func(paths string) string {
		return `sensitive_paths = [{ kind = "ConfigMap", name = "db", paths = [` + paths + `] }]`
	}
	db := func(value string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db, namespace: %s}\ndata: {user: app, password: %q}\n", name, value)
	}
	value := "pa55-" + name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var cleanupConfig string // a configuration whose revision is not in the ledger
	t.Cleanup(func() {
		if cleanupConfig != "" {
			tf.writeConfig(cleanupConfig)
			// Without the Service the API server refuses (OpenTofu's destroy plans the
			// configuration first, and the dry-run preview would refuse it).
			if err := os.WriteFile(filepath.Join(tf.dir, "db.yaml"), []byte(db(value)), 0o600); err != nil {
				t.Error(err)
			}
		}
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	badIP := "bogus-" + name // an invalid Service clusterIP, which the API server quotes back
	leaks := func(where, text string) {
		t.Helper()
		for _, v := range []string{value, badIP} {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
				if i := strings.Index(text, form); i >= 0 {
					t.Errorf("%s shows the sensitive value %q: …%s…", where, form, text[max(0, i-300):min(len(text), i+100)])
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
		return res.output, string(logText)
	}

	// In manifests: refused at plan time, naming the object and the path, before anything is applied.
	tf.writeConfig(blastConfig(f, name, targets, lightBundle(name, "v1")+"---\n"+db(value), rules(`".data.password"`)))
	out, log := run(1, "plan")
	if !regexp.MustCompile(`(?s)Sensitive Fields In Manifests.*ConfigMap ` + name + `/db\s+\.data\.password.*sensitive_manifests`).MatchString(flat(out)) {
		t.Fatalf("a sensitive field in manifests was not refused as such:\n%s", out)
	}
	// Not tied to the attribute: the CLI would print its source, value and all, under the error.
	leaks("the refusal", out)
	// The CLI itself logs the configuration it read (the value was configured where it does not
	// belong); what the provider logs must not repeat it.
	if providerLines(log) == "" {
		t.Fatalf("the TRACE log of the refused plan has no provider lines:\n%s", log)
	}
	leaks("the provider's TRACE log of the refused plan", providerLines(log))
	if recs := workloadRecords(t, f, "staging-eu-1", name); recs.Current != nil || recs.Provisioning != nil {
		t.Fatalf("the refused plan applied something: %s", revOf(recs.Current))
	}

	// In sensitive_manifests (from a file, as a user should): applied, never shown.
	config := func(paths string) string {
		if err := os.WriteFile(filepath.Join(tf.dir, "db.yaml"), []byte(db(value)), 0o600); err != nil {
			t.Fatal(err)
		}
		return blastConfig(f, name, targets, lightBundle(name, "v1"), rules(paths)+"\n  sensitive_manifests = file(\"${path.module}/db.yaml\")")
	}
	tf.writeConfig(config(`".data.password"`))
	out, log = run(0, "plan", "-out=one.tfplan")
	leaks("plan output", out)
	leaks("the plan's TRACE log", log)
	leaks("the saved plan file", planFileText(t, filepath.Join(tf.dir, "one.tfplan")))
	var planJSON map[string]any
	tf.showJSON(ctx, &planJSON, "one.tfplan")
	leaks("show -json of the plan", fmt.Sprint(planJSON))
	out, log = run(0, "apply", "-input=false", "one.tfplan")
	leaks("apply output", out)
	leaks("the apply's TRACE log", log)
	var cm corev1.ConfigMap
	if err := workloadClient(t, f, "staging-eu-1").Get(ctx, client.ObjectKey{Namespace: name, Name: "db"}, &cm); err != nil {
		t.Fatalf("ConfigMap %s/db did not land: %v", name, err)
	}
	if cm.Data["password"] != value {
		t.Fatalf("ConfigMap %s/db holds %q, want the configured value", name, cm.Data["password"])
	}
	stateFile, err := os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	leaks("the state file", string(stateFile))
	if !strings.Contains(string(stateFile), "/ConfigMap "+name+"/db") || !strings.Contains(string(stateFile), ".data.password") {
		t.Errorf("the state does not name the object and the rule:\n%s", stateFile)
	}
	var state map[string]any
	tf.showJSON(ctx, &state)
	leaks("show -json", fmt.Sprint(state))
	rev1 := tf.stateValues(ctx, "gradual_rollout.test").Revision
	tf.mustRun(ctx, 0, "plan", "-detailed-exitcode")

	// The rules are part of the revision: declaring one more path plans an update.
	tf.writeConfig(config(`".data.password", ".data.token"`))
	out, log = run(2, "plan", "-detailed-exitcode", "-out=two.tfplan")
	leaks("the second plan", out+log)
	if change := tf.planChange(ctx, "two.tfplan", "gradual_rollout.test"); change.After.Revision == "" || change.After.Revision == rev1 {
		t.Fatalf("changed sensitive_paths planned revision %q (was %q)", change.After.Revision, rev1)
	}
	out, log = run(0, "apply", "-input=false", "two.tfplan")
	leaks("the second apply", out+log)
	stateFile, _ = os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	leaks("the state file after the update", string(stateFile))
	cleanupConfig = config(`".data.password", ".data.token"`)

	// An apply error that would quote a sensitive value: the API server refuses a Service whose
	// clusterIP (declared sensitive) is not an IP, and says what it got. The error reaches the
	// apply's diagnostics, the TRACE log, the ledger and the state's invalid_revisions redacted.
	svc := fmt.Sprintf("---\napiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: %s}\n"+
		"spec: {clusterIP: %q, ports: [{port: 80}]}\n", name, badIP)
	if err := os.WriteFile(filepath.Join(tf.dir, "db.yaml"), []byte(db(value)+svc), 0o600); err != nil {
		t.Fatal(err)
	}
	failing := func(preview string) string {
		return blastConfig(f, name, targets, lightBundle(name, "v1"), `sensitive_paths = [
    { kind = "ConfigMap", name = "db", paths = [".data.password"] },
    { kind = "Service", paths = [".spec.clusterIP"] },
  ]
  sensitive_manifests = file("${path.module}/db.yaml")
  preview = "`+preview+`"`)
	}
	// The plan's dry-run preview meets the refusal first: it fails the plan, redacted too.
	tf.writeConfig(failing("canary"))
	out, log = run(1, "plan")
	if !strings.Contains(flat(out), "Manifests Rejected By The API Server") {
		t.Fatalf("the preview did not refuse the Service:\n%s", out)
	}
	leaks("the preview's refusal", out)
	leaks("the preview's provider TRACE log", providerLines(log))
	// Without the preview, apply meets it.
	tf.writeConfig(failing("none"))
	out, log = run(1, "apply", "-auto-approve")
	if !strings.Contains(flat(out), "clusterIP") {
		t.Fatalf("the apply did not fail on the Service's clusterIP:\n%s", out)
	}
	leaks("the failed apply's output", out)
	leaks("the failed apply's provider TRACE log", providerLines(log))
	stateFile, _ = os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	leaks("the state file after the failed apply", string(stateFile))
	ledger := ledgerOf(t, f, name)
	if len(ledger) == 0 || !strings.Contains(ledger[0].Reason, "(sensitive value)") {
		t.Fatalf("the ledger does not record the failure redacted: %+v", ledger)
	}
	leaks("the ledger", fmt.Sprint(ledger))
}

// providerLines keeps the lines of a TRACE log that the provider wrote (the CLI prefixes them
// with the plugin's name).
func providerLines(log string) string {
	var b strings.Builder
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "terraform-provider-gradual") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
