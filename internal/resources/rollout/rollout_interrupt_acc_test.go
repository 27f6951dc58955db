//go:build unix

package rollout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// SIGINT to the CLI mid-wave, as Ctrl-C would send it. terraform-plugin-testing cannot send
// signals, so this test drives the CLI named by TF_ACC_TERRAFORM_PATH itself, against the
// provider binary built from this repository (dev_overrides).
//
// v2's Deployment has minReadySeconds, so the first cluster stays in flight (applied, not yet
// verified) for at least that long: the interrupt, sent once the progress record shows the first
// cluster provisioning and its Deployment carries v2, lands while v2 is applied there and being
// verified. Then:
//   - the CLI exits non-zero once the provider has brought the in-flight cluster back to its
//     backup (v1) and recorded it; no later wave started; nothing is left provisioning; the
//     revision is not recorded invalid (cancelling is not the revision's fault); the Lease is
//     released;
//   - the next plan is an update that shows every cluster going from v1 to v2;
//   - applying that saved plan converges: every cluster on v2.
func TestAccRollout_interrupt(t *testing.T) {
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("interrupt")
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1, v2 := app(name, "v1", false, ""), slowReady(app(name, "v2", false, ""), interruptMinReady)
	rev1, rev2 := revisionOf(t, v1), revisionOf(t, v2)
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if res := tf.run(ctx, "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})

	// 1. v1 everywhere.
	tf.writeConfig(interruptConfig(f, name, v1))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
		t.Fatal(err)
	}

	// 2. v2: interrupt the apply while the first wave's cluster is in flight.
	tf.writeConfig(interruptConfig(f, name, v2))
	started := time.Now()
	p := tf.start(true, "apply", "-auto-approve")
	defer p.kill() // only if the test ends before the CLI does
	inFlight := waitInFlight(t, f, key, rev2, "v2", p, 3*time.Minute)
	signalled := time.Now()
	d := inFlight.deployment
	t.Logf("%s in flight after %s: wave %d/%d, recorded %s %s ago, v2 applied (Deployment generation %d, observed %d); sending SIGINT to the CLI (pid %d)",
		inFlight.cluster, signalled.Sub(started).Round(time.Millisecond), inFlight.progress.Wave, inFlight.progress.Waves,
		inFlight.outcome.State, signalled.Sub(inFlight.outcome.StartedAt).Round(time.Millisecond), d.Generation, d.Status.ObservedGeneration, p.cmd.Process.Pid)
	if inFlight.cluster != "prod-eu-1" {
		t.Errorf("first cluster in flight is %s, want prod-eu-1 (wave 1)", inFlight.cluster)
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("send SIGINT: %v", err)
	}
	res := p.wait(t, 4*time.Minute)
	exited := time.Now()
	t.Logf("the CLI exited %d, %s after SIGINT; its output:\n%s", res.code, exited.Sub(signalled).Round(time.Millisecond), res.output)
	tf.logInterruptTrace(p.logPath, signalled)
	if res.code == 0 {
		t.Fatal("the interrupted apply exited 0")
	}
	if !regexp.MustCompile(`(?s)Rollout Failed.*cancelled`).MatchString(res.output) {
		t.Error("the interrupted apply does not say the rollout was cancelled")
	}

	// Where the run left the fleet: every cluster settled and recorded, the in-flight one back
	// on v1, no later wave started.
	progress := loadProgress(t, f, key)
	logProgress(t, progress, signalled)
	if progress.Phase != records.PhaseInterrupted {
		t.Errorf("progress phase %q, want %q", progress.Phase, records.PhaseInterrupted)
	}
	for cluster, o := range progress.Clusters {
		want := "not-started"
		if cluster == inFlight.cluster {
			want = "cancelled" // restored to its backup on the interrupt
		}
		if o.State != want || o.Revision != rev1 {
			t.Errorf("progress: %s %s on %s, want %s on %s", cluster, o.State, o.Revision, want, rev1)
		}
	}
	for _, cluster := range clusters {
		state := workloadRecords(t, f, cluster, name)
		switch {
		case state.Provisioning != nil:
			t.Errorf("%s: left provisioning %s after the interrupt (the restore should have settled it)", cluster, state.Provisioning.Revision)
		case len(state.Superseded) > 0:
			t.Errorf("%s: superseded records left: %+v", cluster, state.Superseded)
		case state.Current == nil || state.Current.Revision != rev1:
			t.Errorf("%s: current record %+v, want %s (v1: in flight and restored, or never started)", cluster, state.Current, rev1)
		}
		if len(state.Invalid) > 0 {
			t.Errorf("%s: an interrupted revision was recorded invalid: %+v", cluster, state.Invalid)
		}
	}
	if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
		t.Errorf("after the interrupt: %v", err)
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v after an interrupt, want empty", ledger)
	}
	expectLeaseFree(t, f, key)
	if t.Failed() {
		t.FailNow()
	}

	// 3. The next plan shows the interrupted state: an update moving every cluster to v2.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	planOut := tf.mustRun(ctx, 2, "plan", "-detailed-exitcode", "-out=interrupted.tfplan")
	for _, want := range []string{"gradual_rollout.test will be updated in-place", "summary"} {
		if !strings.Contains(planOut, want) {
			t.Errorf("plan output lacks %q:\n%s", want, planOut)
		}
	}
	change := tf.planChange(ctx, "interrupted.tfplan", "gradual_rollout.test")
	if strings.Join(change.Actions, ",") != "update" {
		t.Errorf("planned actions %v, want [update]", change.Actions)
	}
	// The state the interrupted apply returned holds v2's configuration when the CLI kept it;
	// either way the clusters in it are on v1.
	t.Logf("state before the plan: revision %s (v1 %s, v2 %s), summary %v, attention %v", change.Before.Revision, rev1, rev2,
		change.Before.Summary, change.Before.Attention)
	for _, cluster := range clusters {
		note := change.Before.Attention[cluster]
		currentOnV1 := change.Before.Revision == rev1 && note == ""
		if !currentOnV1 && !strings.Contains(note, "runs revision "+rev1) {
			t.Errorf("plan: %s before: attention %q (rollout revision %s), want it on %s", cluster, note, change.Before.Revision, rev1)
		}
	}
	// What apply will do: every cluster, one wave each. Where they end up is known after apply.
	if got := change.After.Waves; got != "3 waves of 1 cluster" {
		t.Errorf("planned waves %q, want one cluster per wave", got)
	}
	if err := expectWaveClusters(planOut, "prod-eu-1", "prod-us-1", "staging-eu-1"); err != nil {
		t.Error(err)
	}
	if change.After.Revision != rev2 {
		t.Errorf("planned revision %s, want %s", change.After.Revision, rev2)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 4. Applying that plan converges.
	ctx, cancel = context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	tf.mustRun(ctx, 0, "apply", "-input=false", "interrupted.tfplan")
	state := tf.stateValues(ctx, "gradual_rollout.test")
	if err := state.expectAllCurrent(int64(len(clusters)), rev2); err != nil || state.BackupRevision != rev1 {
		t.Errorf("state: %v; backup %s, want %s", err, state.BackupRevision, rev1)
	}
	for _, cluster := range clusters {
		recs := workloadRecords(t, f, cluster, name)
		if recs.Provisioning != nil || recs.Current == nil || recs.Current.Revision != rev2 || recs.Backup == nil || recs.Backup.Revision != rev1 {
			t.Errorf("%s: records current %v backup %v provisioning %v, want current %s backup %s", cluster,
				revOf(recs.Current), revOf(recs.Backup), revOf(recs.Provisioning), rev2, rev1)
		}
	}
	if err := expectDeployment(f, clusters, name, "v2", true); err != nil {
		t.Error(err)
	}
	if final := loadProgress(t, f, key); final.Phase != records.PhaseSucceeded || final.Revision != rev2 {
		t.Errorf("progress after the converging apply: phase %s revision %s, want succeeded on %s", final.Phase, final.Revision, rev2)
	}
	expectLeaseFree(t, f, key)
}

// interruptMinReady is how long v2's pods must be ready before its Deployment counts as
// available: the window in which the first cluster is in flight.
const interruptMinReady = 10

// slowReady makes app's Deployment available only minReady seconds after its pods are ready
// (progressDeadlineSeconds must exceed minReadySeconds). All new pods start at once, so a
// rollout waits minReady once, not once per pod.
func slowReady(manifests string, minReady int) string {
	const old = "  progressDeadlineSeconds: 10\n"
	if !strings.Contains(manifests, old) {
		panic("slowReady: app() changed")
	}
	return strings.Replace(manifests, old, fmt.Sprintf("  progressDeadlineSeconds: %d\n  minReadySeconds: %d\n  strategy: {rollingUpdate: {maxSurge: 100%%}}\n", 4*minReady, minReady), 1)
}

func interruptConfig(f *testbed.Fleet, name, manifests string) string {
	return `terraform {
  required_providers {
    gradual = { source = "gradual-dev/gradual" }
  }
}

` + acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "test" {
  name         = %q
  namespace    = %q
  %s
  update_limit = "1"
  manifests    = <<-EOT
%s  EOT
  verify = { timeout = "90s" }
}
`, name, f.Namespace, allThree, indent(manifests))
}

type inFlightAt struct {
	cluster    string
	progress   *records.Progress
	outcome    records.ClusterOutcome
	deployment appsv1.Deployment
}

// waitInFlight polls until a cluster is recorded provisioning revision in the management
// cluster's progress record and its Deployment carries version's image: the cluster's change
// is applied and being verified. It fails if the CLI exits first or nothing is within timeout.
func waitInFlight(t *testing.T, f *testbed.Fleet, key records.Key, revision, version string, p *cliProcess, timeout time.Duration) inFlightAt {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	store := records.NewManagementStore(mc, records.DefaultNamespace)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var (
		at      inFlightAt
		lastErr error
	)
	for {
		select {
		case <-p.done:
			t.Fatalf("the apply exited (%d) before any cluster was in flight (last error %v):\n%s", p.result().code, lastErr, p.result().output)
		case <-deadline.C:
			p.kill()
			t.Fatalf("no cluster was in flight to %s within %s (last error %v):\n%s", revision, timeout, lastErr, p.result().output)
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lastErr = func() error {
			if at.cluster == "" {
				progress, err := store.LoadProgress(ctx, key)
				if err != nil || progress == nil || progress.Revision != revision || progress.Phase != records.PhaseRunning {
					return err
				}
				for cluster, o := range progress.Clusters {
					if o.State == "provisioning" && o.Revision == revision {
						at = inFlightAt{cluster: cluster, progress: progress, outcome: o}
					}
				}
				if at.cluster == "" {
					return nil
				}
			}
			c, err := f.WorkloadClient(at.cluster)
			if err != nil {
				return err
			}
			return c.Get(ctx, client.ObjectKey{Namespace: key.Name, Name: "web"}, &at.deployment)
		}()
		cancel()
		if at.deployment.Name != "" && strings.HasSuffix(at.deployment.Spec.Template.Spec.Containers[0].Image, ":"+version) {
			return at
		}
	}
}

func loadProgress(t *testing.T, f *testbed.Fleet, key records.Key) *records.Progress {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	p, err := records.NewManagementStore(mc, records.DefaultNamespace).LoadProgress(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		t.Fatalf("no progress record of %s", key)
	}
	return p
}

func logProgress(t *testing.T, p *records.Progress, signalled time.Time) {
	t.Helper()
	names := make([]string, 0, len(p.Clusters))
	for n := range p.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "progress record: phase %s, wave %d/%d, revision %s", p.Phase, p.Wave, p.Waves, p.Revision)
	for _, n := range names {
		o := p.Clusters[n]
		fmt.Fprintf(&b, "\n  %s: %s on %s", n, o.State, o.Revision)
		if !o.StartedAt.IsZero() && !o.FinishedAt.IsZero() {
			fmt.Fprintf(&b, ", started %s before SIGINT, finished %s after it", signalled.Sub(o.StartedAt).Round(time.Millisecond), o.FinishedAt.Sub(signalled).Round(time.Millisecond))
		}
		if o.Reason != "" {
			fmt.Fprintf(&b, " (%s)", o.Reason)
		}
	}
	t.Log(b.String())
}

// expectLeaseFree checks that no live process holds the rollout's Lease: it is released
// (deleted, or without holder) or expired, so the next apply can take it.
func expectLeaseFree(t *testing.T, f *testbed.Fleet, key records.Key) {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	var lease coordinationv1.Lease
	err = mc.Get(context.Background(), client.ObjectKey{Namespace: records.DefaultNamespace, Name: key.ObjectName()}, &lease)
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return
	}
	expires := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	if time.Now().Before(expires) {
		t.Errorf("Lease %s is still held by %s until %s after the CLI exited", key.ObjectName(), holder, expires.Format(time.RFC3339))
	}
}

func revOf(r *records.Revision) string {
	if r == nil {
		return "-"
	}
	return r.Revision
}

// --- driving the CLI ---

// cliRun is a working directory for the CLI under test, with the provider built from this
// repository installed through dev_overrides.
type cliRun struct {
	t    *testing.T
	path string // the CLI binary
	dir  string
	env  []string
	n    int // commands run, to name their log files
}

func newCLIRun(t *testing.T) *cliRun {
	t.Helper()
	path := os.Getenv("TF_ACC_TERRAFORM_PATH")
	root := t.TempDir()
	plugins, dir := filepath.Join(root, "plugins"), filepath.Join(root, "work")
	for _, d := range []string{plugins, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	acctest.InstallProvider(t, plugins)
	rc := filepath.Join(root, "cli.tfrc")
	config := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "registry.terraform.io/gradual-dev/gradual" = %[1]q
    "registry.opentofu.org/gradual-dev/gradual" = %[1]q
  }
  direct {}
}
`, plugins)
	if err := os.WriteFile(rc, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0",
		"TF_LOG=", "TF_LOG_PATH=", "TF_REATTACH_PROVIDERS=")
	return &cliRun{t: t, path: path, dir: dir, env: env}
}

func (c *cliRun) writeConfig(config string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, "main.tf"), []byte(config), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

type cliResult struct {
	code   int
	output string
}

// cliProcess is one running CLI command. It runs in its own process group, so that a test
// that gives up on it can kill the provider it started along with it.
type cliProcess struct {
	cmd     *exec.Cmd
	out     *bytes.Buffer
	done    chan struct{}
	err     error
	logPath string
}

// start runs the CLI in the working directory with args; with trace, it logs at TRACE to a file
// of its own (cliProcess.logPath).
func (c *cliRun) start(trace bool, args ...string) *cliProcess {
	c.t.Helper()
	c.n++
	logPath := filepath.Join(c.dir, fmt.Sprintf("cli-%02d-%s.log", c.n, args[0]))
	full := append([]string{args[0], "-no-color"}, args[1:]...)
	cmd := exec.Command(c.path, full...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	if trace {
		cmd.Env = append(append([]string{}, c.env...), "TF_LOG=TRACE", "TF_LOG_PATH="+logPath)
	}
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s %s: %v", c.path, strings.Join(full, " "), err)
	}
	p := &cliProcess{cmd: cmd, out: out, done: make(chan struct{}), logPath: logPath}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *cliProcess) result() cliResult {
	<-p.done
	code := p.cmd.ProcessState.ExitCode()
	if code < 0 && p.err != nil {
		code = -1
	}
	return cliResult{code: code, output: p.out.String()}
}

// kill stops the process group unless the CLI has exited (its provider exits with it).
func (p *cliProcess) kill() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// wait waits for the CLI to exit, killing it (and failing the test) after timeout.
func (p *cliProcess) wait(t *testing.T, timeout time.Duration) cliResult {
	t.Helper()
	select {
	case <-p.done:
		return p.result()
	case <-time.After(timeout):
		p.kill()
		t.Fatalf("%s did not exit within %s; killed it. Output:\n%s", strings.Join(p.cmd.Args, " "), timeout, p.out.String())
		return cliResult{}
	}
}

// run runs the CLI to completion, bounded by ctx.
func (c *cliRun) run(ctx context.Context, args ...string) cliResult {
	c.t.Helper()
	p := c.start(false, args...)
	select {
	case <-p.done:
		return p.result()
	case <-ctx.Done():
		p.kill()
		res := p.result()
		res.output += fmt.Sprintf("\n[test: killed after %v]", ctx.Err())
		if res.code == 0 {
			res.code = -1
		}
		return res
	}
}

// mustRun runs the CLI and fails the test unless it exits with want. It returns the output.
func (c *cliRun) mustRun(ctx context.Context, want int, args ...string) string {
	c.t.Helper()
	start := time.Now()
	res := c.run(ctx, args...)
	if res.code != want {
		c.t.Fatalf("%s %s exited %d, want %d, after %s:\n%s", filepath.Base(c.path), strings.Join(args, " "), res.code, want, time.Since(start).Round(time.Millisecond), res.output)
	}
	c.t.Logf("%s %s: exit %d after %s", filepath.Base(c.path), strings.Join(args, " "), res.code, time.Since(start).Round(time.Millisecond))
	return res.output
}

// rolloutValues is the part of gradual_rollout's JSON values the test reads.
type rolloutValues struct {
	Revision       string            `json:"revision"`
	BackupRevision string            `json:"backup_revision"`
	Waves          string            `json:"waves"`
	Summary        map[string]int64  `json:"summary"`
	Attention      map[string]string `json:"attention"`
}

// expectAllCurrent checks that v reports n clusters, all current on revision.
func (v rolloutValues) expectAllCurrent(n int64, revision string) error {
	if v.Revision != revision || len(v.Attention) > 0 || v.Summary["current"] != n || len(v.Summary) != 1 {
		return fmt.Errorf("revision %s, summary %v, attention %v; want %d clusters, all current on %s", v.Revision, v.Summary, v.Attention, n, revision)
	}
	return nil
}

// expectWaveClusters checks that the plan output's "Planned Waves" warning names, for each wave
// in order, its clusters.
func expectWaveClusters(output string, waves ...string) error {
	for i, clusters := range waves {
		want := regexp.MustCompile(fmt.Sprintf(`wave %d( \(canary\))?: %s\n`, i+1, regexp.QuoteMeta(clusters)))
		if !want.MatchString(output) {
			return fmt.Errorf("plan output lacks %q:\n%s", want, output)
		}
	}
	return nil
}

type resourceChange struct {
	Actions []string
	Before  rolloutValues
	After   rolloutValues
}

// planChange reads the change to address from a saved plan (`show -json PLAN`).
func (c *cliRun) planChange(ctx context.Context, plan, address string) resourceChange {
	c.t.Helper()
	var doc struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string        `json:"actions"`
				Before  json.RawMessage `json:"before"`
				After   json.RawMessage `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	c.showJSON(ctx, &doc, plan)
	for _, rc := range doc.ResourceChanges {
		if rc.Address != address {
			continue
		}
		out := resourceChange{Actions: rc.Change.Actions}
		for _, v := range []struct {
			raw json.RawMessage
			to  *rolloutValues
		}{{rc.Change.Before, &out.Before}, {rc.Change.After, &out.After}} {
			if len(v.raw) > 0 && string(v.raw) != "null" {
				if err := json.Unmarshal(v.raw, v.to); err != nil {
					c.t.Fatalf("decode the planned change of %s: %v", address, err)
				}
			}
		}
		return out
	}
	c.t.Fatalf("the plan has no change to %s", address)
	return resourceChange{}
}

// stateValues reads address's values from the state (`show -json`).
func (c *cliRun) stateValues(ctx context.Context, address string) rolloutValues {
	c.t.Helper()
	var doc struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string          `json:"address"`
					Values  json.RawMessage `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	c.showJSON(ctx, &doc)
	for _, r := range doc.Values.RootModule.Resources {
		if r.Address == address {
			var v rolloutValues
			if err := json.Unmarshal(r.Values, &v); err != nil {
				c.t.Fatalf("decode the state of %s: %v", address, err)
			}
			return v
		}
	}
	c.t.Fatalf("the state has no %s", address)
	return rolloutValues{}
}

func (c *cliRun) showJSON(ctx context.Context, into any, args ...string) {
	c.t.Helper()
	cmd := exec.CommandContext(ctx, c.path, append([]string{"show", "-json"}, args...)...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("show -json %v: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(out, into); err != nil {
		c.t.Fatalf("decode show -json %v: %v\n%s", args, err, out)
	}
}

// interruptTrace matches the lines of a TRACE log that show how the interrupt travelled: the
// CLI stopping, the provider's StopProvider RPC and the end of the apply call.
var interruptTrace = regexp.MustCompile(`(?i)interrupt|tf_rpc=StopProvider|stopping|stop called|all our contexts|cancel|run-finished|wave \d+/\d+ done|Response contains error|plugin process exited`)

// logInterruptTrace logs the lines of the CLI's TRACE log that show how the interrupt reached
// the provider, from shortly before it was sent.
func (c *cliRun) logInterruptTrace(path string, since time.Time) {
	c.t.Helper()
	file, err := os.Open(path)
	if err != nil {
		c.t.Logf("no CLI log: %v", err)
		return
	}
	defer func() { _ = file.Close() }()
	var lines []string
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !interruptTrace.MatchString(line) {
			continue
		}
		if ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", strings.SplitN(line, " ", 2)[0]); err == nil && ts.Before(since.Add(-100*time.Millisecond)) {
			continue
		}
		if len(line) > 400 {
			line = line[:400] + "…"
		}
		lines = append(lines, line)
		if len(lines) == 60 {
			lines = append(lines, "[…]")
			break
		}
	}
	c.t.Logf("how the interrupt travelled (CLI TRACE log, %s):\n%s", path, strings.Join(lines, "\n"))
}
