package acctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// ProviderBinaryEnv names a provider binary already built from this checkout (tools/testacc.sh
// builds one for every lane), so that tests that run the CLI as a user would do not each build
// their own.
const ProviderBinaryEnv = "GRADUAL_PROVIDER_BINARY"

var built struct {
	once sync.Once
	path string
	err  error
}

// InstallProvider puts the provider binary, named as Terraform expects, into dir (for a CLI
// configuration's dev_overrides). It is the binary ProviderBinaryEnv names, or else one built
// from this checkout once per test process.
func InstallProvider(t *testing.T, dir string) {
	t.Helper()
	src := os.Getenv(ProviderBinaryEnv)
	if src == "" {
		built.once.Do(func() { built.path, built.err = buildProvider(t) })
		if built.err != nil {
			t.Fatal(built.err)
		}
		src = built.path
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("provider binary: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(src, filepath.Join(dir, "terraform-provider-gradual")); err != nil {
		t.Fatal(err)
	}
}

// buildProvider builds the provider from the module root into a directory that lives as long as
// the test process (the OS's temporary directory; tools/testacc.sh names a prebuilt one instead).
func buildProvider(t *testing.T) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gradual-provider-")
	if err != nil {
		return "", err
	}
	// Not t's context: the binary is the process's, built for whichever test comes first.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := clock.System{}.Now()
	path := filepath.Join(dir, "terraform-provider-gradual")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the provider: %w\n%s", err, out)
	}
	t.Logf("built the provider in %s (set %s to reuse one)", time.Since(start).Round(time.Millisecond), ProviderBinaryEnv)
	return path, nil
}

// moduleRoot is the directory of this module's go.mod, above the test's working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		// tools/ has a go.mod of its own: the module's is the one that names it.
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(data, []byte("module github.com/gradual-dev/terraform-provider-gradual\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod of github.com/gradual-dev/terraform-provider-gradual not found above the working directory")
		}
		dir = parent
	}
}
