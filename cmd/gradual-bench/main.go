// Command gradual-bench is the end-to-end half of `make bench` (tools/bench.sh builds the
// toolchain, starts a fleet and calls it). On a running test bed it rolls one 20-object revision
// (a Namespace, 9 ConfigMaps, 5 Services, 5 Deployments) out to every workload cluster twice over:
//
//   - provider: `tofu apply` of a gradual_rollout that picks every cluster with update_limit equal
//     to their number (one wave) and the default verification (every object ready, by kstatus);
//   - baseline: per cluster, in parallel, `kubectl apply --server-side` of the same file and
//     `kubectl wait --for=condition=Available deployment --all`.
//
// Each side runs -runs times, alternating which goes first, into fresh namespaces, and the medians
// are compared; a warm-up round of both sides on the fresh fleet comes first and is shown but not
// counted (the first pods on new kwok nodes and cold caches in new control planes are slower). It also reports the provider's peak RSS (VmHWM of every terraform-provider-gradual
// process tofu starts, polled every 50ms) and the time of a no-change `tofu plan`.
//
//	gradual-bench --fleet DIR --plugins DIR [--runs 5] [--warmup=true] [--clusters 4] [--tofu PATH] [--kubectl PATH] [--logs DIR]
//
// With --sizes it measures the curve instead (see curve.go): plan, first apply, no-change plan and
// the kubectl baseline at each size, on a scale bed (gradual-testbed up --clusters N).
//
//	gradual-bench --fleet DIR --plugins DIR --sizes 4,16,64,256,1000 [--csv FILE] [--markdown FILE]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

const providerBinary = "terraform-provider-gradual"

// Bounds, so that a broken fleet fails the benchmark instead of hanging it.
const (
	applyTimeout = 4 * time.Minute
	planTimeout  = 2 * time.Minute
	waitTimeout  = 3 * time.Minute
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gradual-bench:", err)
		os.Exit(1)
	}
}

type config struct {
	fleetDir, plugins, tofu, kubectl, work, logs string
	sizes, csv, markdown, engines                string
	runs, clusters                               int
	warmup                                       bool
	// curveApply bounds each apply of the curve (--apply-timeout).
	curveApply time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("gradual-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.fleetDir, "fleet", "", "state directory of a running test bed (gradual-testbed up --dir)")
	fs.StringVar(&c.plugins, "plugins", "", "directory holding the built "+providerBinary+" binary (dev_overrides)")
	fs.StringVar(&c.tofu, "tofu", os.Getenv("GRADUAL_TOFU"), "OpenTofu binary")
	fs.StringVar(&c.kubectl, "kubectl", "", "kubectl binary for the baseline (default $GRADUAL_KUBECTL, else kubectl on PATH; \"none\": no baseline)")
	fs.StringVar(&c.work, "work", "", "scratch directory (default: a new temp dir, removed at the end)")
	fs.StringVar(&c.logs, "logs", "", "if set, write each tofu run's provider log (TF_LOG_PROVIDER=INFO) here")
	fs.IntVar(&c.runs, "runs", 5, "counted runs of each side")
	fs.BoolVar(&c.warmup, "warmup", true, "run both sides once before the counted runs, not counted")
	fs.IntVar(&c.clusters, "clusters", 4, "workload clusters the fleet must have (all of them get the revision)")
	fs.StringVar(&c.sizes, "sizes", "", "measure the curve at these numbers of Clusters (e.g. 4,16,64,256,1000) instead of the 4-cluster comparison")
	fs.StringVar(&c.csv, "csv", "", "curve: write it as CSV to this file")
	fs.StringVar(&c.markdown, "markdown", "", "curve: write it as a Markdown table (with the machine and date) to this file")
	fs.DurationVar(&c.curveApply, "apply-timeout", curveApplyTimeout, "curve: how long each apply may take before it is stopped (a fleet of 1,000 through Flux on a loaded machine takes longer than the default)")
	fs.StringVar(&c.engines, "engines", engineDirect, "curve: the delivery engines to measure at each size, direct and/or flux (flux needs a bed started with --flux)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.fleetDir == "" || c.plugins == "" || c.tofu == "" {
		return errors.New("--fleet, --plugins and --tofu (or $GRADUAL_TOFU) are required")
	}
	if c.runs < 1 || c.clusters < 1 {
		return errors.New("--runs and --clusters must be at least 1")
	}
	if c.kubectl == "" {
		c.kubectl = os.Getenv("GRADUAL_KUBECTL")
	}
	if c.kubectl == "" {
		c.kubectl, _ = exec.LookPath("kubectl")
	}
	if c.kubectl == "none" { // no baseline, on purpose
		c.kubectl = ""
	}
	if c.work == "" {
		dir, err := os.MkdirTemp("", "gradual-bench-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		c.work = dir
	}
	if c.logs != "" {
		if err := os.MkdirAll(c.logs, 0o755); err != nil {
			return err
		}
	}
	logf := func(format string, a ...any) {
		_, _ = fmt.Fprintf(stderr, "[bench %s] %s\n", clock.System{}.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}

	f, err := testbed.Load(c.fleetDir)
	if err != nil {
		return err
	}
	if c.sizes != "" {
		return curve(ctx, c, f, logf, stdout)
	}
	targets, err := readyWorkloads(ctx, f, c.clusters)
	if err != nil {
		return err
	}
	logf("fleet %s: %d workload clusters answer: %s", f.Name, len(targets), names(targets))

	p := &providerSide{cfg: c, fleet: f, targets: targets, logf: logf}
	if err := p.setup(); err != nil {
		return err
	}
	var k *kubectlSide
	if c.kubectl == "" {
		logf("no kubectl (neither $GRADUAL_KUBECTL nor kubectl on PATH): the kubectl baseline is skipped")
	} else {
		k = &kubectlSide{kubectl: c.kubectl, work: c.work, targets: targets, logf: logf}
		logf("baseline: %s", k.version(ctx))
	}

	var results []result
	first := 1
	if c.warmup {
		first = 0
	}
	for i := first; i <= c.runs; i++ {
		r := result{run: i, providerFirst: i%2 == 1 || k == nil}
		sides := []func() error{
			func() (err error) { r.provider, err = p.run(ctx, i); return err },
		}
		if k != nil {
			kube := func() (err error) { r.kubectl, err = k.run(ctx, i); return err }
			if r.providerFirst {
				sides = append(sides, kube)
			} else {
				sides = append([]func() error{kube}, sides...)
			}
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return fmt.Errorf("run %d: %w", i, err)
			}
		}
		results = append(results, r)
	}
	_, err = io.WriteString(stdout, report(results, k != nil, len(targets)))
	return err
}

// readyWorkloads returns the fleet's workload clusters that have a control plane and are marked
// ready, after checking that each API server answers; it wants exactly n of them.
func readyWorkloads(ctx context.Context, f *testbed.Fleet, n int) ([]*testbed.Workload, error) {
	var out []*testbed.Workload
	for _, name := range slices.Sorted(maps.Keys(f.Workloads)) {
		w := f.Workloads[name]
		if w.KubeconfigPath == "" || !w.Spec.Ready || w.Spec.Paused {
			continue
		}
		if err := testbed.Check(ctx, w.Cluster); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if len(out) != n {
		return nil, fmt.Errorf("fleet %s has %d ready workload clusters (%s), want %d", f.Name, len(out), names(out), n)
	}
	return out, nil
}

func names(ws []*testbed.Workload) string {
	var s []string
	for _, w := range ws {
		s = append(s, w.Name)
	}
	return strings.Join(s, ", ")
}

// manifests is the benchmark's revision in namespace ns: 20 objects.
func manifests(ns string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: config-%d
  namespace: %s
data:
  index: "%d"
  settings.yaml: |
    log_level: info
    workers: %d
`, i, ns, i, i)
	}
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata:
  name: app-%[1]d
  namespace: %[2]s
spec:
  selector: {app: app-%[1]d}
  ports:
    - {name: http, port: 80, targetPort: 8080}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: %[2]s
spec:
  replicas: %[3]d
  selector:
    matchLabels: {app: app-%[1]d}
  template:
    metadata:
      labels: {app: app-%[1]d}
    spec:
      containers:
        - name: app
          image: registry.example/app:1.0.%[1]d
          ports:
            - {containerPort: 8080}
          envFrom:
            - configMapRef: {name: config-%[1]d}
`, i, ns, 1+i%2)
	}
	return b.String()
}

type result struct {
	run           int
	providerFirst bool
	provider      providerRun
	kubectl       time.Duration
}

type providerRun struct {
	apply, plan time.Duration
	// peakRSS (planPeakRSS) is the largest VmHWM of any provider process of the apply (the
	// no-change plan), in bytes.
	peakRSS, planPeakRSS int64
}

// providerSide runs OpenTofu with the provider built for this benchmark (dev_overrides).
type providerSide struct {
	cfg     config
	fleet   *testbed.Fleet
	targets []*testbed.Workload
	logf    func(string, ...any)
	rcFile  string
}

func (p *providerSide) setup() error {
	bin := filepath.Join(p.cfg.plugins, providerBinary)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("provider binary: %w", err)
	}
	p.rcFile = filepath.Join(p.cfg.work, "cli.tfrc")
	rc := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "gradual-dev/gradual"                       = %[1]q
    "registry.terraform.io/gradual-dev/gradual" = %[1]q
    "registry.opentofu.org/gradual-dev/gradual" = %[1]q
  }
  direct {}
}
`, p.cfg.plugins)
	return os.WriteFile(p.rcFile, []byte(rc), 0o644)
}

func (p *providerSide) config(name string) string {
	var clusters []string
	for _, w := range p.targets {
		clusters = append(clusters, strconv.Quote(w.Name))
	}
	pick := "names        = [" + strings.Join(clusters, ", ") + "]"
	return p.benchConfig(name, pick, fmt.Sprintf(`update_limit = "%d"`, len(p.targets)))
}

// benchConfig is the configuration of the benchmark's rollout, bench, named name: pick is the
// line that picks its clusters (names or selector), settings the lines after its manifests.
func (p *providerSide) benchConfig(name, pick, settings string) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    gradual = { source = "gradual-dev/gradual" }
  }
}

provider "gradual" {
  kubeconfig_path = %q
}

resource "gradual_rollout" "bench" {
  name         = %q
  namespace    = %q
  %s
  manifests    = file("${path.module}/manifests.yaml")
  %s
}

output "summary" {
  value = gradual_rollout.bench.summary
}

output "skipped" {
  value = gradual_rollout.bench.skipped
}
`, p.fleet.Management.KubeconfigPath, name, p.fleet.Namespace, pick, settings)
}

// run applies the revision into namespace bench-p<i> (rollout of the same name), checks that
// every cluster ended on it, then times a no-change plan.
func (p *providerSide) run(ctx context.Context, i int) (providerRun, error) {
	var r providerRun
	name := fmt.Sprintf("bench-p%d", i)
	dir := filepath.Join(p.cfg.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(p.config(name)), 0o644); err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte(manifests(name)), 0o644); err != nil {
		return r, err
	}

	var err error
	var procs int
	r.apply, r.peakRSS, procs, err = p.tofu(ctx, dir, name+"-apply", applyTimeout, "apply", "-auto-approve")
	if err != nil {
		return r, err
	}
	if err := p.checkApplied(ctx, dir, name, len(p.targets)); err != nil {
		return r, err
	}
	p.logf("provider run %d: tofu apply %s, provider peak RSS %.0f MB (%d provider processes seen)", i, sec(r.apply), mb(r.peakRSS), procs)

	r.plan, r.planPeakRSS, _, err = p.tofu(ctx, dir, name+"-plan", planTimeout, "plan", "-detailed-exitcode")
	if err != nil {
		return r, fmt.Errorf("no-change plan: %w", err) // exit code 2 (changes) lands here too
	}
	p.logf("provider run %d: no-change tofu plan %s", i, sec(r.plan))
	return r, nil
}

// tofu runs one OpenTofu command in dir (measure) and returns its wall-clock time, the peak RSS of
// the provider processes it started and their count.
func (p *providerSide) tofu(ctx context.Context, dir, logName string, timeout time.Duration, args ...string) (time.Duration, int64, int, error) {
	s, err := p.measure(ctx, dir, logName, timeout, args...)
	return s.elapsed, s.peakRSS, s.procs, err
}

// checkApplied reads the outputs: n clusters current, none skipped.
func (p *providerSide) checkApplied(ctx context.Context, dir, name string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.cfg.tofu, "-chdir="+dir, "output", "-json")
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+p.rcFile, "CHECKPOINT_DISABLE=1")
	raw, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("tofu output: %w", err)
	}
	var outputs struct {
		Summary struct {
			Value map[string]int
		} `json:"summary"`
		Skipped struct{ Value map[string]string }
	}
	if err := json.Unmarshal(raw, &outputs); err != nil {
		return fmt.Errorf("tofu output: %w", err)
	}
	if len(outputs.Skipped.Value) > 0 {
		return fmt.Errorf("%s: clusters skipped: %v", name, outputs.Skipped.Value)
	}
	if current := outputs.Summary.Value["current"]; current != n {
		return fmt.Errorf("%s: %d of %d clusters current after apply (summary %v)", name, current, n, outputs.Summary.Value)
	}
	return nil
}

// kubectlSide is the baseline: plain kubectl, one process per cluster at a time.
type kubectlSide struct {
	kubectl string
	work    string
	targets []*testbed.Workload
	logf    func(string, ...any)
}

func (k *kubectlSide) version(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, k.kubectl, "version", "--client").CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n")
	if err != nil {
		return fmt.Sprintf("%s (version: %v)", k.kubectl, err)
	}
	return fmt.Sprintf("%s (%s)", k.kubectl, strings.TrimSpace(first))
}

// run applies the revision into namespace bench-k<i> on every cluster at once and waits until
// its Deployments are Available; the time is until the last cluster is done.
func (k *kubectlSide) run(ctx context.Context, i int) (time.Duration, error) {
	ns := fmt.Sprintf("bench-k%d", i)
	file := filepath.Join(k.work, ns+".yaml")
	if err := os.WriteFile(file, []byte(manifests(ns)), 0o644); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, waitTimeout+time.Minute)
	defer cancel()
	start := clock.System{}.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(k.targets))
	for j, w := range k.targets {
		wg.Go(func() {
			kc := "--kubeconfig=" + w.KubeconfigPath
			steps := [][]string{
				{"apply", kc, "--server-side", "--field-manager=bench", "-f", file},
				{"wait", kc, "--for=condition=Available", "deployment", "--all", "-n", ns, "--timeout=" + waitTimeout.String()},
			}
			for _, args := range steps {
				cmd := exec.CommandContext(ctx, k.kubectl, args...)
				cmd.WaitDelay = 10 * time.Second
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[j] = fmt.Errorf("cluster %s: kubectl %s: %w\n%s", w.Name, args[0], err, tail(string(out), 20))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return elapsed, err
	}
	k.logf("kubectl run %d: apply + wait on %d clusters %s", i, len(k.targets), sec(elapsed))
	return elapsed, nil
}

// rssSampler polls the VmHWM (peak resident set) of every provider process that is a child of
// pid, every 50ms, until stopped.
type rssSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak map[int]int64
	// cpu is the last seen user+system CPU time of each provider process, in clock ticks (it
	// misses at most the last 50ms of a process).
	cpu map[int]int64
}

func newRSSSampler(pid int) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), peak: map[int]int64{}, cpu: map[int]int64{}}
	s.wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		isProvider := map[int]bool{}
		for {
			for _, c := range children(pid) {
				yes, known := isProvider[c]
				if !known {
					exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c))
					yes = filepath.Base(exe) == providerBinary
					isProvider[c] = yes
				}
				if yes {
					if hwm := vmHWM(c); hwm > s.peak[c] {
						s.peak[c] = hwm
					}
					if t := cpuTicks(c); t > s.cpu[c] {
						s.cpu[c] = t
					}
				}
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	})
	return s
}

// stop ends the sampling; it returns the largest peak of any provider process and their number.
func (s *rssSampler) stop() (int64, int) {
	close(s.done)
	s.wg.Wait()
	var peak int64
	for _, v := range s.peak {
		peak = max(peak, v)
	}
	return peak, len(s.peak)
}

// children lists pid's child processes (from every thread's /proc/PID/task/TID/children).
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// vmHWM reads a process's peak resident set size in bytes (0 when it is gone).
func vmHWM(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

func report(results []result, baseline bool, clusters int) string {
	var w strings.Builder
	fmt.Fprintf(&w, "\nEnd-to-end: one 20-object revision to %d workload clusters (update_limit = %d), verification included\n\n", clusters, clusters)
	tw := tabwriter.NewWriter(&w, 0, 4, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "run\tfirst\ttofu apply\tkubectl apply+wait\tprovider peak RSS\tno-change plan\t")
	var applies, kubes, plans []time.Duration
	var peak int64
	for _, r := range results {
		first := "provider"
		if !r.providerFirst {
			first = "kubectl"
		}
		kube := "-"
		if baseline {
			kube = sec(r.kubectl)
		}
		peak = max(peak, r.provider.peakRSS, r.provider.planPeakRSS)
		run := strconv.Itoa(r.run)
		if r.run == 0 {
			run = "warm-up"
		} else {
			applies = append(applies, r.provider.apply)
			plans = append(plans, r.provider.plan)
			if baseline {
				kubes = append(kubes, r.kubectl)
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f MB\t%s\t\n", run, first, sec(r.provider.apply), kube, mb(r.provider.peakRSS), sec(r.provider.plan))
	}
	kube := "-"
	if baseline {
		kube = sec(median(kubes))
	}
	_, _ = fmt.Fprintf(tw, "median of %d\t\t%s\t%s\t\t%s\t\n", len(applies), sec(median(applies)), kube, sec(median(plans)))
	_ = tw.Flush()
	fmt.Fprintln(&w)
	if baseline {
		ratio := median(applies).Seconds() / median(kubes).Seconds()
		verdict := "within"
		if ratio > 1.2 {
			verdict = "over"
		}
		fmt.Fprintf(&w, "provider / kubectl (medians): %.2fx (%s the goal of 1.2x)\n", ratio, verdict)
	} else {
		fmt.Fprintln(&w, "provider / kubectl: no kubectl, no baseline")
	}
	fmt.Fprintf(&w, "provider peak RSS (largest VmHWM of any provider process, all runs and plans): %.0f MB\n", mb(peak))
	fmt.Fprintf(&w, "no-change tofu plan (median): %s\n", sec(median(plans)))
	return w.String()
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func sec(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on every Linux ABI Go runs on.
const clockTicks = 100

// cpuTicks reads a process's user+system CPU time in clock ticks (0 when it is gone).
func cpuTicks(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after its closing parenthesis are fixed.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(raw)[i+1:])
	if len(fields) < 13 { // utime and stime are fields 14 and 15: 12th and 13th after ')'
		return 0
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return utime + stime
}

// cpuSeconds is the CPU time of every provider process seen, summed.
func (s *rssSampler) cpuSeconds() float64 {
	var total int64
	for _, t := range s.cpu {
		total += t
	}
	return float64(total) / clockTicks
}
