package acctest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// GenerateConfigOut runs `plan -generate-config-out=generated.tf` in work (whose configuration
// holds the import block) and returns what the CLI wrote there. The plan itself may fail (a
// generated block that does not validate is still written): that is the caller's to judge from
// the file.
func GenerateConfigOut(ctx context.Context, t *testing.T, cli, work, rc string) string {
	t.Helper()
	out, _, code := TryCLI(ctx, cli, work, rc, "plan", "-generate-config-out=generated.tf")
	b, err := os.ReadFile(filepath.Join(work, "generated.tf"))
	if err != nil {
		t.Fatalf("%s plan -generate-config-out wrote no configuration (exit %d): %v\n%s", filepath.Base(cli), code, err, Tail(out, 40))
	}
	t.Logf("%s plan -generate-config-out: exit %d; generated.tf:\n%s", filepath.Base(cli), code, b)
	return string(b)
}

var nullAttribute = regexp.MustCompile(`(?m)^(\s*)(\w+)\s*=\s*null\b.*$`)

// SetGenerated rewrites each `attr = null` line of generated.tf in work whose attribute values
// names to the expression values gives, as the docs tell a user to; it fails the test when an
// attribute of values is not written as null (the case the docs describe no longer arises).
func SetGenerated(t *testing.T, work string, values map[string]string) {
	t.Helper()
	file := filepath.Join(work, "generated.tf")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	text := nullAttribute.ReplaceAllStringFunc(string(b), func(line string) string {
		m := nullAttribute.FindStringSubmatch(line)
		if expr, ok := values[m[2]]; ok {
			set[m[2]] = true
			return m[1] + m[2] + " = " + expr
		}
		return line
	})
	for attr := range values {
		if !set[attr] {
			t.Fatalf("generated.tf has no `%s = null` line to set", attr)
		}
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ExpectImportNoOp plans in work (saved) and fails the test unless address is imported with
// no change.
func ExpectImportNoOp(ctx context.Context, t *testing.T, cli, work, rc, address string) {
	t.Helper()
	out, _ := RunCLI(ctx, t, cli, work, rc, "plan", "-out=import.tfplan")
	// `show` takes no -input: run it as it is.
	cmd := exec.CommandContext(ctx, cli, "-chdir="+work, "show", "-json", "import.tfplan")
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_LOG=")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s show -json: %v", filepath.Base(cli), err)
	}
	shown := string(b)
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions   []string        `json:"actions"`
				Importing json.RawMessage `json:"importing"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(shown[strings.Index(shown, "{"):]), &plan); err != nil {
		t.Fatalf("reading the plan: %v", err)
	}
	for _, rc := range plan.ResourceChanges {
		if rc.Address != address {
			continue
		}
		if len(rc.Change.Importing) == 0 || strings.Join(rc.Change.Actions, ",") != "no-op" {
			t.Fatalf("%s: want an import with no change, the plan has actions %v, importing %s:\n%s", address, rc.Change.Actions, rc.Change.Importing, Tail(out, 60))
		}
		return
	}
	t.Fatalf("the plan has no change for %s:\n%s", address, Tail(out, 60))
}
