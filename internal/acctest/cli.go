package acctest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// A CLI run as a person runs it: `tofu plan` or `terraform plan` in a directory of its own, the
// provider installed through dev_overrides, the plan printed on stdout. terraform-plugin-testing
// drives the CLI too but never shows what it prints; the tests of what a reviewer reads (plan
// line budgets) need that text.

// DevOverrides installs the provider under work and writes a CLI configuration that loads it
// (dev_overrides for both registries); it returns the configuration's path.
func DevOverrides(t *testing.T, work string) string {
	t.Helper()
	bin := filepath.Join(work, "plugins")
	InstallProvider(t, bin)
	rc := filepath.Join(work, "cli.tfrc")
	content := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "registry.terraform.io/gradual-dev/gradual" = %[1]q
    "registry.opentofu.org/gradual-dev/gradual" = %[1]q
  }
  direct {}
}
`, bin)
	if err := os.WriteFile(rc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return rc
}

// DevOverridesConfig is the header of a configuration run with DevOverrides: the provider, by
// its source address, on f's management cluster.
func DevOverridesConfig(f *testbed.Fleet) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    gradual = { source = "gradual-dev/gradual" }
  }
}

provider "gradual" {
  kubeconfig_path = %[1]q
}
`, f.Management.KubeconfigPath)
}

// RunCLI runs `cli SUBCOMMAND -input=false -no-color REST...` in work with the CLI configuration
// rc, and returns what it printed and how long it took; a failure fails the test with the end of
// the output.
func RunCLI(ctx context.Context, t *testing.T, cli, work, rc string, args ...string) (string, time.Duration) {
	t.Helper()
	out, took, code := TryCLI(ctx, cli, work, rc, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", filepath.Base(cli), args[0], code, Tail(out, 60))
	}
	return out, took
}

// TryCLI is RunCLI for a run that may fail (a fault test's apply, `plan -detailed-exitcode`): it
// returns the exit code (-1 when the CLI did not run or was killed) instead of failing the test.
func TryCLI(ctx context.Context, cli, work, rc string, args ...string) (out string, took time.Duration, code int) {
	start := clock.System{}.Now()
	// Flags first: a saved plan is the last argument.
	cmd := exec.CommandContext(ctx, cli, append([]string{"-chdir=" + work, args[0], "-input=false", "-no-color"}, args[1:]...)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_LOG=")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code == 0 {
		code = -1
	}
	if err != nil && cmd.ProcessState == nil {
		buf.WriteString(err.Error())
	}
	return buf.String(), time.Since(start), code
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CLIProcess is a CLI command started by StartCLI, running in a process group of its own so that
// Kill stops the provider it started along with it: what a CI job cancelled, or a runner lost,
// leaves behind.
type CLIProcess struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

// StartCLI starts `cli SUBCOMMAND -input=false -no-color REST...` in work with the CLI
// configuration rc, without waiting for it.
func StartCLI(t *testing.T, cli, work, rc string, args ...string) *CLIProcess {
	t.Helper()
	cmd := exec.Command(cli, append([]string{"-chdir=" + work, args[0], "-input=false", "-no-color"}, args[1:]...)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_LOG=")
	p := &CLIProcess{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %s: %v", filepath.Base(cli), args[0], err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Done is closed once the command has ended.
func (p *CLIProcess) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the command's process group (the CLI and its provider) and waits for the
// CLI to end; a command that ended already is left alone.
func (p *CLIProcess) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Output is what the command printed; only once it has ended (Done).
func (p *CLIProcess) Output() string {
	<-p.done
	return p.out.String()
}
