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
)

// `plan -generate-config-out` for an existing rollout, the way the docs describe it: the CLI
// writes `manifests = null` (it never writes a sensitive value into generated configuration),
// and `manifests = data.gradual_rollout_status.<name>.manifests` makes the generated block plan
// an import with no change.
func TestAccRollout_generateConfigOut(t *testing.T) {
	acctest.PreCheck(t)
	f := acctest.Fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	name := acctest.UniqueLabel("genconf")

	// The rollout, applied from a configuration of its own.
	made := t.TempDir()
	rc := acctest.DevOverrides(t, made)
	write := func(dir, file, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(made, "main.tf", acctest.DevOverridesConfig(f)+fmt.Sprintf(`
resource "gradual_rollout" "app" {
  name         = %q
  namespace    = %q
  selector     = { match_labels = { env = "prod" } }
  update_limit = "50%%"
  manifests    = <<-EOT
%s  EOT
  verify = { timeout = "90s" }
}
`, name, f.Namespace, indent(app(name, "v1", false, ""))))
	acctest.RunCLI(ctx, t, cli, made, rc, "apply", "-auto-approve")
	t.Cleanup(func() { acctest.RunCLI(context.Background(), t, cli, made, rc, "destroy", "-auto-approve") })

	// A second working directory with only the import block, as someone adopting the rollout
	// into another configuration starts.
	work := t.TempDir()
	write(work, "main.tf", acctest.DevOverridesConfig(f)+fmt.Sprintf(`
import {
  to = gradual_rollout.imported
  id = "%s/%s"
}
`, f.Namespace, name))
	generated := acctest.GenerateConfigOut(ctx, t, cli, work, rc)
	for _, want := range []string{`resource "gradual_rollout" "imported"`, `name`, `update_limit`} {
		if !strings.Contains(generated, want) {
			t.Errorf("generated.tf has no %s", want)
		}
	}
	write(work, "status.tf", fmt.Sprintf(`
data "gradual_rollout_status" "imported" {
  namespace = %q
  name      = %q
}
`, f.Namespace, name))
	acctest.SetGenerated(t, work, map[string]string{"manifests": "data.gradual_rollout_status.imported.manifests"})
	acctest.ExpectImportNoOp(ctx, t, cli, work, rc, "gradual_rollout.imported")
}
