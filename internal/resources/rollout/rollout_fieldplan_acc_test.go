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

// fieldPlanBudget is the most lines `plan` may print for a one-field change of one object,
// whatever the object's size.
const fieldPlanBudget = 60

// Plans sized by the change down to the field: Cluster API's ClusterClass CRD (5,000+ lines of
// YAML) rolled out to one cluster, then one annotation added to it, plans in at most
// fieldPlanBudget lines as the CLI prints it, showing the annotation and hiding the rest. This
// is what the CLI renders, so it runs on both lanes.
func TestAccRollout_fieldLevelPlan(t *testing.T) {
	acctest.PreCheck(t)
	f := acctest.Fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := testbed.CAPIModuleDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(root, "config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml"))
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
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(work, "terraform.tfstate")); err == nil {
			acctest.RunCLI(context.Background(), t, cli, work, rc, "destroy", "-auto-approve")
		}
	})

	write(strings.Replace(string(crd), anchor, anchor+"    gradual.dev/reviewed: \"field-level\"\n", 1))
	out, took := run("plan")
	lines := strings.Count(out, "\n")
	t.Logf("%s: plan of one annotation added to the ClusterClass CRD: %d lines, %s:\n%s", filepath.Base(cli), lines, took.Round(100*time.Millisecond), out)
	if lines > fieldPlanBudget {
		t.Errorf("the plan has %d lines, want at most %d", lines, fieldPlanBudget)
	}
	for _, want := range []string{`+ "gradual.dev/reviewed"`, "unchanged attributes hidden", "# gradual_rollout.crd will be updated in-place"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not show %q", want)
		}
	}
}
