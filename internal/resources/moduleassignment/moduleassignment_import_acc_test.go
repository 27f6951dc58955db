package moduleassignment_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// `plan -generate-config-out` for an existing assignment, the way the docs describe it: the
// CLI writes each module's `manifests = null` (it never writes a sensitive value into generated
// configuration), and the status data source's recorded `manifests` make the generated block
// plan an import with no change.
func TestAccModuleAssignment_generateConfigOut(t *testing.T) {
	acctest.PreCheck(t)
	f := acctest.Fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	name := acctest.UniqueLabel("genconf")
	newLabeler(t, f, name, "prod-eu-1", "staging-eu-1")
	write := func(dir, file, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The assignment, applied from a configuration of its own.
	made := t.TempDir()
	rc := acctest.DevOverrides(t, made)
	cfg := module{name: "cfg", version: "1.0.0", manifests: configMaps(name, "v1", "settings")}
	write(made, "main.tf", acctest.DevOverridesConfig(f)+assignmentConfig(f, "test", name, name, `update_limit = "1"`, cfg))
	acctest.RunCLI(ctx, t, cli, made, rc, "apply", "-auto-approve")
	t.Cleanup(func() { acctest.RunCLI(context.Background(), t, cli, made, rc, "destroy", "-auto-approve") })

	// A second working directory with only the import block.
	work := t.TempDir()
	write(work, "main.tf", acctest.DevOverridesConfig(f)+fmt.Sprintf(`
import {
  to = gradual_module_assignment.imported
  id = "%s/%s"
}

data "gradual_module_assignment_status" "imported" {
  namespace = %q
  name      = %q
}
`, f.Namespace, name, f.Namespace, name))
	acctest.GenerateConfigOut(ctx, t, cli, work, rc)
	acctest.SetGenerated(t, work, map[string]string{"manifests": `data.gradual_module_assignment_status.imported.manifests["cfg"]`})
	acctest.ExpectImportNoOp(ctx, t, cli, work, rc, "gradual_module_assignment.imported")
}
