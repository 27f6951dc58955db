package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// fieldPlanBudget is the most lines `plan` may print for a one-field change of one object near
// its top (an annotation added), whatever the object's size. deepFieldPlanBudget is the budget
// of a change twenty levels down: the CLI prints the path to the field, two or three lines per
// level, and a changed multi-line string whole (here a 55-line description).
const (
	fieldPlanBudget     = 60
	deepFieldPlanBudget = 200
)

// Plans sized by the change down to the field: Cluster API's ClusterClass CRD (5,520 lines of
// YAML) rolled out to one cluster, then one annotation added to it, plans in at most
// fieldPlanBudget lines as the CLI prints it, showing the annotation and hiding the rest; a
// description changed deep in its schema, in at most deepFieldPlanBudget. This is what the CLI
// renders, so it runs on both lanes.
func TestAccRollout_fieldLevelPlan(t *testing.T) {
	acctest.PreCheck(t)
	f := acctest.Fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := testbed.CAPIModuleDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(root, "core/config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ClusterClass CRD: %d lines, %d bytes", strings.Count(string(crd), "\n"), len(crd))
	const anchor = "  annotations:\n"
	if !strings.Contains(string(crd), anchor) {
		t.Fatalf("the CRD has no metadata.annotations to add to")
	}
	name := acctest.UniqueLabel("fieldplan")
	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	run := func(args ...string) (string, time.Duration) {
		t.Helper()
		return acctest.RunCLI(ctx, t, cli, work, rc, args...)
	}
	write := func(bundle string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(work, "crd.yaml"), []byte(bundle), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := acctest.DevOverridesConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "crd" {
  name      = %q
  namespace = %q
  names     = ["staging-eu-1"]
  manifests = file("${path.module}/crd.yaml")
}
`, name, f.Namespace)
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	write(string(crd))
	_, took := run("apply", "-auto-approve")
	t.Logf("%s: the CRD applied in %s", filepath.Base(cli), took.Round(100*time.Millisecond))
	// The state holds the bundle's text and each object as JSON: under twice the bundle.
	st, err := os.Stat(filepath.Join(work, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state: %d bytes for a bundle of %d (%.2f×)", st.Size(), len(crd), float64(st.Size())/float64(len(crd)))
	if st.Size() >= 2*int64(len(crd)) {
		t.Errorf("the state is %d bytes, want under twice the bundle's %d", st.Size(), len(crd))
	}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(work, "terraform.tfstate")); err == nil {
			acctest.RunCLI(context.Background(), t, cli, work, rc, "destroy", "-auto-approve")
		}
	})

	// One annotation added (metadata.annotations), then one description deep in the schema
	// changed instead (a dozen levels down: spec.versions[].schema.openAPIV3Schema…).
	const deep = `description: "rule represents the expression`
	at := strings.LastIndex(string(crd), deep)
	if at < 0 {
		t.Fatalf("the CRD has no %q to change", deep)
	}
	for _, edit := range []struct {
		what, bundle, shows string
		budget              int
	}{
		{"one annotation added", strings.Replace(string(crd), anchor, anchor+"    gradual.dev/reviewed: \"field-level\"\n", 1), `+ "gradual.dev/reviewed"`, fieldPlanBudget},
		{"one description deep in the schema changed", string(crd[:at]) + `description: "Rule represents the expression` + string(crd[at+len(deep):]),
			`+ Rule represents the expression`, deepFieldPlanBudget},
	} {
		write(edit.bundle)
		out, took := run("plan")
		shown := withoutDevOverridesWarning(out)
		lines := strings.Count(shown, "\n")
		t.Logf("%s: plan of %s in the ClusterClass CRD: %d lines (%d with the test's dev_overrides warning), %s:\n%s",
			filepath.Base(cli), edit.what, lines, strings.Count(out, "\n"), took.Round(100*time.Millisecond), shown)
		if lines > edit.budget {
			t.Errorf("%s: the plan has %d lines, want at most %d", edit.what, lines, edit.budget)
		}
		for _, want := range []string{edit.shows, "unchanged attributes hidden", "# gradual_rollout.crd will be updated in-place"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the plan does not show %q", edit.what, want)
			}
		}
	}
}

// withoutDevOverridesWarning drops the warning both CLIs print first when the provider comes from
// dev_overrides, as in these tests: a user of the released provider never sees it.
func withoutDevOverridesWarning(out string) string {
	start := strings.Index(out, "Warning: Provider development overrides are in effect")
	if start < 0 {
		return out
	}
	end := strings.Index(out[start:], "releases.\n")
	if end < 0 {
		return out
	}
	return out[:start] + out[start+end+len("releases.\n"):]
}
