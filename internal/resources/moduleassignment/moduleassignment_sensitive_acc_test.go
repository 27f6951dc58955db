package moduleassignment_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// modules[].sensitive_manifests: a Secret goes to the cluster, and its value (raw and base64)
// appears in no plan or apply output, saved plan, `show -json` or state file; a new value plans
// an update (the module's revision changes) and is applied; a refresh then plans nothing.
func TestAccModuleAssignment_sensitiveManifests(t *testing.T) {
	f := acctest.Fleet(t)
	acctest.PreCheck(t)
	name := acctest.UniqueLabel("wo")
	newLabeler(t, f, name, "staging-eu-1")
	cli := newCLI(t)
	one, two := "s3cr3t-one-"+name, "s3cr3t-two-"+name
	write := func(value string) {
		t.Helper()
		secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: %q}\n", name, value)
		// As a user should: from a file (or an ephemeral value), not a literal in the
		// configuration, which Terraform itself copies into saved plans.
		if err := os.WriteFile(filepath.Join(cli.dir, "secret.yaml"), []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		config := acctest.ProviderConfig(f) + fmt.Sprintf(`
terraform {
  required_providers {
    gradual = { source = "gradual-dev/gradual" }
  }
}

resource "gradual_module_assignment" "test" {
  name      = %[1]q
  namespace = %[2]q
  selector  = { match_labels = { %[1]q = "yes" } }
  verify    = { timeout = "60s" }
  modules = [{
    name                = "creds"
    version             = "1"
    manifests           = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n"
    sensitive_manifests = file("${path.module}/secret.yaml")
  }]
}
`, name, f.Namespace)
		if err := os.WriteFile(filepath.Join(cli.dir, "main.tf"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
	t.Cleanup(func() {
		if out, code := cli.run("destroy", "-auto-approve"); code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", code, out)
		}
	})

	write(one)
	out := cli.must(0, "plan", "-out=one.tfplan")
	leaks("plan output", out, one)
	leaks("the saved plan", zipText(t, filepath.Join(cli.dir, "one.tfplan")), one)
	leaks("show -json of the plan", cli.must(0, "show", "-json", "one.tfplan"), one)
	out = cli.must(0, "apply", "one.tfplan")
	leaks("apply output", out, one)
	if err := expectSecretValue(f.WorkloadClient, "staging-eu-1", name, one); err != nil {
		t.Fatal(err) // the value was there to leak
	}
	state := cli.state()
	leaks("the state file", state, one)
	if !strings.Contains(state, "/Secret "+name+"/db") {
		t.Errorf("sensitive_objects does not name the Secret:\n%s", state)
	}
	leaks("show -json", cli.must(0, "show", "-json"), one)
	rev1 := revisionOf(t, cli.must(0, "show", "-json"), "creds")

	// A new value: an update (the revision covers it), still never shown.
	write(two)
	out = cli.must(2, "plan", "-detailed-exitcode", "-out=two.tfplan")
	leaks("the second plan", out, one, two)
	planJSON := cli.must(0, "show", "-json", "two.tfplan")
	leaks("show -json of the second plan", planJSON, one, two)
	var plan struct {
		ResourceChanges []struct {
			Change struct {
				After map[string]any `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil || len(plan.ResourceChanges) != 1 {
		t.Fatalf("plan JSON: %v", err)
	}
	revs, _ := plan.ResourceChanges[0].Change.After["revisions"].(map[string]any)
	if rev2, _ := revs["creds"].(string); rev2 == "" || rev2 == rev1 {
		t.Fatalf("a changed Secret value planned revision %q (was %q)", rev2, rev1)
	}
	out = cli.must(0, "apply", "two.tfplan")
	leaks("the second apply", out, one, two)
	if err := expectSecretValue(f.WorkloadClient, "staging-eu-1", name, two); err != nil {
		t.Fatal(err)
	}
	leaks("the state file", cli.state(), one, two)
	// Refresh and a plan with nothing to do: the records carry the Secret, the state does not.
	cli.must(0, "plan", "-detailed-exitcode")
}

func expectSecretValue(workload func(string) (client.Client, error), cluster, ns, want string) error {
	c, err := workload(cluster)
	if err != nil {
		return err
	}
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db"}, &s); err != nil {
		return fmt.Errorf("%s: Secret %s/db: %w", cluster, ns, err)
	}
	if got := string(s.Data["password"]); got != want {
		return fmt.Errorf("%s: Secret %s/db holds %d bytes, not the configured value", cluster, ns, len(got))
	}
	return nil
}

// revisionOf returns module's revision from `show -json` of the state.
func revisionOf(t *testing.T, showJSON, module string) string {
	t.Helper()
	var state struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Values map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal([]byte(showJSON), &state); err != nil || len(state.Values.RootModule.Resources) != 1 {
		t.Fatalf("show -json: %v", err)
	}
	revs, _ := state.Values.RootModule.Resources[0].Values["revisions"].(map[string]any)
	rev, _ := revs[module].(string)
	if rev == "" {
		t.Fatalf("no revision of module %s in state", module)
	}
	return rev
}

// zipText is every entry of a saved plan (a zip archive), uncompressed.
func zipText(t *testing.T, path string) string {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var b strings.Builder
	for _, f := range r.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(&b, rc)
		rc.Close()
	}
	return b.String()
}

// cliRun runs the CLI under test (TF_ACC_TERRAFORM_PATH) as a user would, in its own directory,
// with the provider built from this repository (dev_overrides): the plan output and the files a
// user gets, which the in-process provider of terraform-plugin-testing does not show.
type cliRun struct {
	t    *testing.T
	path string
	dir  string
	env  []string
}

func newCLI(t *testing.T) *cliRun {
	t.Helper()
	root := t.TempDir()
	plugins, dir := filepath.Join(root, "plugins"), filepath.Join(root, "work")
	for _, d := range []string{plugins, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	acctest.InstallProvider(t, plugins)
	rc := filepath.Join(root, "cli.tfrc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, `provider_installation {
  dev_overrides {
    "registry.terraform.io/gradual-dev/gradual" = %[1]q
    "registry.opentofu.org/gradual-dev/gradual" = %[1]q
  }
  direct {}
}
`, plugins), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0",
		"TF_LOG=", "TF_LOG_PATH=", "TF_REATTACH_PROVIDERS=")
	return &cliRun{t: t, path: os.Getenv("TF_ACC_TERRAFORM_PATH"), dir: dir, env: env}
}

func (c *cliRun) run(args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, append([]string{"-chdir=" + c.dir}, append(args, "-no-color")...)...)
	cmd.Env = c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	return out.String() + err.Error(), -1
}

// must runs the CLI and fails the test unless it exits with want.
func (c *cliRun) must(want int, args ...string) string {
	c.t.Helper()
	out, code := c.run(args...)
	if code != want {
		c.t.Fatalf("%s %s exited %d, want %d:\n%s", filepath.Base(c.path), strings.Join(args, " "), code, want, out)
	}
	return out
}

func (c *cliRun) state() string {
	c.t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.dir, "terraform.tfstate"))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(raw)
}
