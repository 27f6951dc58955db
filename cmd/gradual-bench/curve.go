package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// The curve (--sizes): for each size N, one gradual_rollout over the first N ready Clusters of
// the fleet (picked by a label the benchmark sets), timed through OpenTofu:
//
//   - plan: the plan of the create (the fleet read, nothing applied);
//   - first apply: the 20-object revision to all N, verified, at most waveLimit at once
//     (update_limit = min(N, waveLimit));
//   - no-change plan: the plan once it is applied (every Cluster's records read), once the
//     machine has settled after the apply (see settle);
//   - one-Cluster drift repair: a ConfigMap deleted by hand on a Cluster whose API server serves
//     it alone (gradual-testbed --solo), then `tofu plan -out` (which must name that Cluster, and
//     only it, drifted) and `tofu apply` of that saved plan;
//   - revision change: the plan of a new revision (one ConfigMap's value changed) over all N,
//     not applied: what a reviewer reads for the commonest change;
//
// each with the provider's peak RSS, its CPU seconds and, for the plans, the line count of the
// plan output as a person reads it (`tofu plan -no-color`). The baseline is `kubectl apply
// --server-side` + `kubectl wait` of the same file on the same N clusters, at most waveLimit at
// once too, timed in the same run.

// Bounds of one step at any size, so that a broken fleet fails the benchmark instead of hanging it.
const (
	curveApplyTimeout = 20 * time.Minute
	curvePlanTimeout  = 10 * time.Minute
	// waveLimit bounds the clusters changed at once on both sides: the rollout's update_limit and
	// the baseline's concurrent kubectl processes (a thousand kubectl processes at once would
	// measure the machine's fork and memory pressure, not the work).
	waveLimit = 64
	// labelParallel bounds the concurrent label patches of Cluster objects.
	labelParallel = 16
)

// The delivery engines the curve measures (--engines): the provider applying to every workload
// cluster itself, or publishing to the bed's OCI registry and writing one Kustomization per
// Cluster in the management cluster for Flux's controllers to deliver.
const (
	engineDirect = "direct"
	engineFlux   = "flux"
)

func parseEngines(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		switch e := strings.TrimSpace(f); e {
		case engineDirect, engineFlux:
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		default:
			return nil, fmt.Errorf("--engines %q: want direct and/or flux, separated by commas", s)
		}
	}
	return out, nil
}

type curvePoint struct {
	n      int
	engine string
	// flux is what Flux's controllers spent during the first apply (Flux engine only).
	flux                  fluxCost
	plan, apply, noChange step
	// driftPlan and driftApply: the one-Cluster drift repair (zero when the fleet has no Cluster
	// with an API server of its own); changePlan: the plan of a revision change.
	driftPlan, driftApply, changePlan step
	kubectl                           time.Duration
	// settled: how long the machine took to settle before the no-change plan, and how busy it
	// still was then (see settle).
	settled settled
	// fluxSources counts the rollout's OCIRepositories after the first apply (Flux engine
	// only): what source-controller pulls, each on its interval. One per namespace and revision
	// however many Clusters run it.
	fluxSources int
}

type step struct {
	elapsed time.Duration
	peakRSS int64
	procs   int     // provider processes started
	cpu     float64 // provider CPU seconds
	// cliCPU is the CLI's own CPU seconds: its rusage, which counts the providers it waited
	// for, less theirs. It says how much of a plan's time is the CLI's work on a large state.
	cliCPU float64
	lines  int    // plan output lines (plans only)
	output string // what the command printed, for the checks of its content
}

// peakRSS is the largest provider RSS of any of the point's commands.
func (pt curvePoint) peakRSS() int64 {
	return max(pt.plan.peakRSS, pt.apply.peakRSS, pt.noChange.peakRSS, pt.driftPlan.peakRSS, pt.driftApply.peakRSS, pt.changePlan.peakRSS)
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--sizes %q: want positive integers separated by commas", s)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

// curveTargets is every ready Cluster with a kubeconfig, in a stable order, after checking that
// each distinct API server answers. A Cluster whose API server serves no other comes first, so
// that every size holds one for the drift repair.
func curveTargets(ctx context.Context, f *testbed.Fleet) ([]*testbed.Workload, error) {
	var out []*testbed.Workload
	checked := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(f.Workloads)) {
		w := f.Workloads[name]
		if w.KubeconfigPath == "" || !w.Spec.Ready || w.Spec.Paused {
			continue
		}
		if !checked[w.Server] {
			if err := testbed.Check(ctx, w.Cluster); err != nil {
				return nil, err
			}
			checked[w.Server] = true
		}
		out = append(out, w)
	}
	perServer := clustersPerServer(f)
	slices.SortStableFunc(out, func(a, b *testbed.Workload) int {
		return cmpBool(perServer[a.Server] == 1, perServer[b.Server] == 1)
	})
	return out, nil
}

// clustersPerServer counts the fleet's Clusters by the API server they reach: a server that
// serves one Cluster is that Cluster's alone (its records and objects too).
func clustersPerServer(f *testbed.Fleet) map[string]int {
	n := map[string]int{}
	for _, w := range f.Workloads {
		if w.Server != "" {
			n[w.Server]++
		}
	}
	return n
}

// cmpBool orders true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// soloTarget is the first of targets whose API server serves no other Cluster of the fleet, or nil.
func soloTarget(f *testbed.Fleet, targets []*testbed.Workload) *testbed.Workload {
	perServer := clustersPerServer(f)
	for _, w := range targets {
		if perServer[w.Server] == 1 {
			return w
		}
	}
	return nil
}

func runCurve(ctx context.Context, c config, f *testbed.Fleet, sizes []int, logf func(string, ...any)) ([]curvePoint, error) {
	engines, err := parseEngines(c.engines)
	if err != nil {
		return nil, err
	}
	if slices.Contains(engines, engineFlux) && f.Flux == nil {
		return nil, fmt.Errorf("--engines %s: fleet %s runs no Flux (gradual-testbed up --flux)", c.engines, f.Name)
	}
	all, err := curveTargets(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(all) < sizes[len(sizes)-1] {
		return nil, fmt.Errorf("fleet %s has %d ready Clusters, the largest size is %d (gradual-testbed up --clusters N)", f.Name, len(all), sizes[len(sizes)-1])
	}
	servers := map[string]bool{}
	for _, w := range all {
		servers[w.Server] = true
	}
	logf("fleet %s: %d ready Clusters over %d API servers; sizes %v", f.Name, len(all), len(servers), sizes)
	p := &providerSide{cfg: c, fleet: f, logf: logf}
	if err := p.setup(); err != nil {
		return nil, err
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return nil, err
	}
	var points []curvePoint
	for _, n := range sizes {
		targets := all[:n]
		label := fmt.Sprintf("bench-n%d", n)
		t0 := clock.System{}.Now()
		if err := labelClusters(ctx, mc, f.Namespace, targets, label); err != nil {
			return points, err
		}
		logf("N=%d: labelled %s=yes on %d Clusters in %s", n, label, n, sec(time.Since(t0)))
		var kube time.Duration
		if c.kubectl != "" {
			k := &kubectlSide{kubectl: c.kubectl, work: c.work, targets: targets, logf: logf}
			if kube, err = k.runBounded(ctx, fmt.Sprintf("curve-k%d", n), waveLimit); err != nil {
				return points, fmt.Errorf("N=%d: baseline: %w", n, err)
			}
		}
		for _, engine := range engines {
			pt, err := p.curvePoint(ctx, n, engine, label, soloTarget(f, targets))
			if err != nil {
				return points, fmt.Errorf("N=%d (%s): %w", n, engine, err)
			}
			pt.kubectl = kube
			points = append(points, pt)
			logf("N=%d (%s): plan %s (%d lines), apply %s, no-change plan %s (%d lines; CLI CPU %.1fs, provider CPU %.1fs), drift repair plan %s (%d lines) + apply %s, revision change plan %s (%d lines), peak RSS %.0f MiB, apply CPU %.1fs, Flux controllers CPU %.1fs peak RSS %.0f MiB, kubectl %s",
				n, engine, sec(pt.plan.elapsed), pt.plan.lines, sec(pt.apply.elapsed), sec(pt.noChange.elapsed), pt.noChange.lines, pt.noChange.cliCPU, pt.noChange.cpu,
				sec(pt.driftPlan.elapsed), pt.driftPlan.lines, sec(pt.driftApply.elapsed), sec(pt.changePlan.elapsed), pt.changePlan.lines,
				mb(pt.peakRSS()), pt.apply.cpu, pt.flux.cpu, mb(pt.flux.peakRSS), sec(pt.kubectl))
		}
	}
	return points, nil
}

// labelClusters sets label=yes on every target's Cluster object (a merge patch of metadata only).
func labelClusters(ctx context.Context, c client.Client, namespace string, targets []*testbed.Workload, label string) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"yes"}}}`, label)))
	var g errgroup.Group
	g.SetLimit(labelParallel)
	errs := make([]error, len(targets))
	for i, w := range targets {
		g.Go(func() error {
			cl := &clusterv1.Cluster{}
			cl.Namespace, cl.Name = namespace, w.Name
			if err := c.Patch(ctx, cl, patch); err != nil {
				errs[i] = fmt.Errorf("label Cluster %s: %w", w.Name, err)
			}
			return nil // every target is tried; the errors are joined
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

func (p *providerSide) curveConfig(name, engine, label string, n int) string {
	delivery := ""
	if engine == engineFlux {
		// The bed's registry is plain HTTP on loopback.
		delivery = fmt.Sprintf("\n  delivery     = { flux = { repository = %q, insecure = true } }", p.fleet.Flux.RegistryURL("bench/"+name))
	}
	pick := fmt.Sprintf(`selector     = { match_labels = { %q = "yes" } }`, label)
	return p.benchConfig(name, pick, fmt.Sprintf(`update_limit = "%d"
  verify       = { timeout = "10m" }%s`, min(n, waveLimit), delivery))
}

func (p *providerSide) curvePoint(ctx context.Context, n int, engine, label string, solo *testbed.Workload) (curvePoint, error) {
	pt := curvePoint{n: n, engine: engine}
	name := fmt.Sprintf("curve-p%d", n)
	if engine == engineFlux {
		name = fmt.Sprintf("curve-flux-p%d", n)
	}
	dir := filepath.Join(p.cfg.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pt, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(p.curveConfig(name, engine, label, n)), 0o644); err != nil {
		return pt, err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte(manifests(name)), 0o644); err != nil {
		return pt, err
	}
	var err error
	if pt.plan, err = p.measure(ctx, dir, name+"-plan", curvePlanTimeout, "plan"); err != nil {
		return pt, err
	}
	flux := p.fluxSampler(engine)
	pt.apply, err = p.measure(ctx, dir, name+"-apply", p.cfg.curveApply, "apply", "-auto-approve")
	pt.flux = flux.stop()
	if err != nil {
		return pt, err
	}
	if err := p.checkApplied(ctx, dir, name, n); err != nil {
		return pt, err
	}
	if engine == engineFlux {
		if pt.fluxSources, err = p.countFluxSources(ctx, name); err != nil {
			return pt, err
		}
	}
	if pt.settled, err = settle(ctx, procStat); err != nil {
		return pt, fmt.Errorf("settle before the no-change plan: %w", err)
	}
	p.logf("N=%d (%s): settled %s before the no-change plan (machine %.0f%% busy)", n, engine, sec(pt.settled.waited), 100*pt.settled.busy)
	// -detailed-exitcode: a plan that is not empty (exit code 2) fails the benchmark.
	if pt.noChange, err = p.measure(ctx, dir, name+"-nochange", curvePlanTimeout, "plan", "-detailed-exitcode"); err != nil {
		return pt, fmt.Errorf("no-change plan: %w", err)
	}
	switch {
	case engine == engineFlux:
		// Flux's kustomize-controller repairs drift between applies by itself; the provider's
		// plan only reports Flux's view. There is no repair of the provider's to time.
		p.logf("N=%d (flux): drift repair is Flux's own (not measured)", n)
	case solo != nil:
		if err := p.driftRepair(ctx, &pt, dir, name, solo); err != nil {
			return pt, fmt.Errorf("drift repair on %s: %w", solo.Name, err)
		}
	default:
		p.logf("N=%d: no Cluster with an API server of its own (gradual-testbed --solo 1): drift repair not measured", n)
	}
	// A new revision, planned only: the plan a reviewer reads for the commonest change.
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte(changedManifests(name)), 0o644); err != nil {
		return pt, err
	}
	if pt.changePlan, err = p.measure(ctx, dir, name+"-change", curvePlanTimeout, "plan"); err != nil {
		return pt, fmt.Errorf("revision change plan: %w", err)
	}
	if !strings.Contains(pt.changePlan.output, "1 to change") {
		return pt, fmt.Errorf("the plan of a revision change plans no update:\n%s", tail(pt.changePlan.output, 40))
	}
	return pt, nil
}

// driftRepair deletes one object of the revision on solo, plans (saved) and applies that plan.
// The plan must name solo, and no other Cluster, as drifted: the repair is one Cluster's work.
func (p *providerSide) driftRepair(ctx context.Context, pt *curvePoint, dir, name string, solo *testbed.Workload) error {
	wc, err := p.fleet.WorkloadClient(solo.Name)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = name, driftedObject
	if err := wc.Delete(ctx, cm); err != nil {
		return fmt.Errorf("delete ConfigMap %s/%s: %w", name, driftedObject, err)
	}
	planFile := "drift.tfplan"
	if pt.driftPlan, err = p.measure(ctx, dir, name+"-drift-plan", curvePlanTimeout, "plan", "-out="+planFile); err != nil {
		return err
	}
	named := regexp.MustCompile(`"` + regexp.QuoteMeta(solo.Name) + `"\s*=\s*"drifted: [^"\n]*ConfigMap ` + regexp.QuoteMeta(name+"/"+driftedObject))
	if !named.MatchString(pt.driftPlan.output) {
		return fmt.Errorf("the plan does not name %s drifted (ConfigMap %s/%s):\n%s", solo.Name, name, driftedObject, tail(pt.driftPlan.output, 60))
	}
	if others := regexp.MustCompile(`"[^"]+"\s*=\s*"drifted: `).FindAllString(pt.driftPlan.output, -1); len(others) != 1 {
		return fmt.Errorf("the plan names %d Clusters drifted, want 1: %v", len(others), others)
	}
	if pt.driftApply, err = p.measure(ctx, dir, name+"-drift-apply", p.cfg.curveApply, "apply", planFile); err != nil {
		return err
	}
	if err := wc.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		return fmt.Errorf("ConfigMap %s/%s after the repair: %w", name, driftedObject, err)
	}
	return nil
}

// driftedObject is the ConfigMap the drift repair deletes by hand.
const driftedObject = "config-1"

// changedManifests is manifests(ns) with one ConfigMap's value changed: a new revision.
func changedManifests(ns string) string {
	return strings.Replace(manifests(ns), "log_level: info", "log_level: debug", 1)
}

// measure runs one OpenTofu command and returns its time, the provider's peak RSS and CPU
// seconds, and the line count of its output.
func (p *providerSide) measure(ctx context.Context, dir, logName string, timeout time.Duration, args ...string) (step, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.cfg.tofu, tofuArgs(dir, args)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+p.rcFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	if p.cfg.logs != "" {
		cmd.Env = append(cmd.Env, "TF_LOG_PROVIDER=INFO", "TF_LOG_PATH="+filepath.Join(p.cfg.logs, logName+".log"))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := clock.System{}.Now()
	if err := cmd.Start(); err != nil {
		return step{}, err
	}
	sampler := newRSSSampler(cmd.Process.Pid)
	err := cmd.Wait()
	s := step{elapsed: time.Since(start), output: out.String()}
	s.peakRSS, s.procs = sampler.stop()
	s.cpu = sampler.cpuSeconds()
	if ps := cmd.ProcessState; ps != nil {
		s.cliCPU = max((ps.UserTime()+ps.SystemTime()).Seconds()-s.cpu, 0)
	}
	s.lines = strings.Count(out.String(), "\n")
	if p.cfg.logs != "" {
		_ = os.WriteFile(filepath.Join(p.cfg.logs, logName+".out"), out.Bytes(), 0o644)
	}
	if err != nil {
		return s, fmt.Errorf("tofu %s in %s: %w\n%s", args[0], dir, err, tail(out.String(), 40))
	}
	return s, nil
}

// tofuArgs is `-chdir=dir SUBCOMMAND -input=false -no-color REST...`: the flags before any
// positional argument (`apply PLANFILE` takes none after it).
func tofuArgs(dir string, args []string) []string {
	out := []string{"-chdir=" + dir, args[0], "-input=false", "-no-color"}
	return append(out, args[1:]...)
}

// runBounded is run with at most limit clusters at once, into namespace ns.
func (k *kubectlSide) runBounded(ctx context.Context, ns string, limit int) (time.Duration, error) {
	file := filepath.Join(k.work, ns+".yaml")
	if err := os.WriteFile(file, []byte(manifests(ns)), 0o644); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, curveApplyTimeout)
	defer cancel()
	start := clock.System{}.Now()
	var g errgroup.Group
	g.SetLimit(limit)
	errs := make([]error, len(k.targets))
	for j, w := range k.targets {
		g.Go(func() error {
			kc := "--kubeconfig=" + w.KubeconfigPath
			for _, args := range [][]string{
				{"apply", kc, "--server-side", "--field-manager=bench", "-f", file},
				{"wait", kc, "--for=condition=Available", "deployment", "--all", "-n", ns, "--timeout=" + waitTimeout.String()},
			} {
				cmd := exec.CommandContext(ctx, k.kubectl, args...)
				cmd.WaitDelay = 10 * time.Second
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[j] = fmt.Errorf("cluster %s: kubectl %s: %w\n%s", w.Name, args[0], err, tail(string(out), 20))
					return nil // every cluster is tried; the errors are joined
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return elapsed, err
	}
	k.logf("kubectl: apply + wait on %d clusters (%d at a time) %s", len(k.targets), limit, sec(elapsed))
	return elapsed, nil
}

var csvHeader = []string{
	"clusters", "plan_s", "plan_lines", "apply_s", "apply_provider_cpu_s", "provider_cpu_s_per_cluster",
	"nochange_plan_s", "nochange_plan_lines", "nochange_provider_cpu_s", "provider_peak_rss_mib", "kubectl_s", "apply_over_kubectl",
	"plan_rss_mib", "apply_rss_mib", "nochange_rss_mib",
	"drift_plan_s", "drift_plan_lines", "drift_apply_s", "change_plan_s", "change_plan_lines",
	"engine", "flux_controllers_cpu_s", "flux_controllers_peak_rss_mib", "cli", "nochange_cli_cpu_s",
	"nochange_settle_s", "nochange_machine_busy", "flux_sources",
}

func (pt curvePoint) row() []string {
	ratio := "-"
	kube := "-"
	if pt.kubectl > 0 {
		kube = fmt.Sprintf("%.1f", pt.kubectl.Seconds())
		ratio = fmt.Sprintf("%.2f", pt.apply.elapsed.Seconds()/pt.kubectl.Seconds())
	}
	return []string{
		strconv.Itoa(pt.n),
		fmt.Sprintf("%.1f", pt.plan.elapsed.Seconds()), strconv.Itoa(pt.plan.lines),
		fmt.Sprintf("%.1f", pt.apply.elapsed.Seconds()), fmt.Sprintf("%.1f", pt.apply.cpu), fmt.Sprintf("%.3f", pt.apply.cpu/float64(pt.n)),
		fmt.Sprintf("%.1f", pt.noChange.elapsed.Seconds()), strconv.Itoa(pt.noChange.lines), fmt.Sprintf("%.1f", pt.noChange.cpu),
		fmt.Sprintf("%.0f", mb(pt.peakRSS())),
		kube, ratio,
		fmt.Sprintf("%.0f", mb(pt.plan.peakRSS)), fmt.Sprintf("%.0f", mb(pt.apply.peakRSS)), fmt.Sprintf("%.0f", mb(pt.noChange.peakRSS)),
		optSeconds(pt.driftPlan), optLines(pt.driftPlan), optSeconds(pt.driftApply),
		fmt.Sprintf("%.1f", pt.changePlan.elapsed.Seconds()), strconv.Itoa(pt.changePlan.lines),
		cmp.Or(pt.engine, engineDirect), optFlux(pt, fmt.Sprintf("%.1f", pt.flux.cpu)), optFlux(pt, fmt.Sprintf("%.0f", mb(pt.flux.peakRSS))),
	}
}

// optFlux is v for a point of the Flux engine, "-" for one of the direct engine.
func optFlux(pt curvePoint, v string) string {
	if pt.engine != engineFlux {
		return "-"
	}
	return v
}

// withUnit adds " s" to a number of seconds, not to "-".
func withUnit(v string) string {
	if v == "-" {
		return v
	}
	return v + " s"
}

// optSeconds and optLines print "-" for a step that did not run.
func optSeconds(s step) string {
	if s.elapsed == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s.elapsed.Seconds())
}

func optLines(s step) string {
	if s.elapsed == 0 {
		return "-"
	}
	return strconv.Itoa(s.lines)
}

// curveCSV is the curve as CSV (no field needs quoting); cli names the CLI that drove the
// provider ("OpenTofu v1.12.6").
func curveCSV(points []curvePoint, cli string) string {
	var b strings.Builder
	b.WriteString(strings.Join(csvHeader, ",") + "\n")
	for _, pt := range points {
		b.WriteString(strings.Join(append(pt.row(), cli, fmt.Sprintf("%.1f", pt.noChange.cliCPU),
			fmt.Sprintf("%.0f", pt.settled.waited.Seconds()), fmt.Sprintf("%.2f", pt.settled.busy),
			optFlux(pt, strconv.Itoa(pt.fluxSources))), ",") + "\n")
	}
	return b.String()
}

// curveMarkdown is the curve as the table of docs-dev/benchmarks-notebook.md, with the machine it ran on.
func curveMarkdown(points []curvePoint, servers int, cli string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s (%d CPUs, %s), %d kwok API servers, driven by %s.\n\n",
		clock.System{}.Now().UTC().Format("2006-01-02 15:04 UTC"), cpuModel(), runtime.NumCPU(), memTotal(), servers, cli)
	all := points
	points = slices.DeleteFunc(slices.Clone(points), func(pt curvePoint) bool { return pt.engine == engineFlux })
	b.WriteString("| Clusters | plan | plan lines | first apply | provider CPU (apply) | CPU per cluster | no-change plan | no-change plan lines | provider peak RSS (plan / apply / no-change) | kubectl apply + wait | apply / kubectl |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, pt := range points {
		r := pt.row()
		fmt.Fprintf(&b, "| %s | %s s | %s | %s s | %s s | %s s | %s s | %s | %s / %s / %s MiB | %s s | %s |\n",
			r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[12], r[13], r[14], r[10], r[11])
	}
	b.WriteString("\nChanges once applied: a revision change planned over all N Clusters, and a one-Cluster drift repair (plan saved, then applied).\n\n")
	b.WriteString("| Clusters | revision change: plan | plan lines | drift repair: plan | plan lines | apply of the saved plan |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	for _, pt := range points {
		r := pt.row()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r[0], withUnit(r[18]), r[19], withUnit(r[15]), r[16], withUnit(r[17]))
	}
	if len(points) < len(all) {
		b.WriteString(fluxMarkdown(all))
	}
	return b.String()
}

// fluxMarkdown is the table of the two engines side by side at each size: the first apply
// (until every Cluster is verified on the revision), what it cost the provider and, for the Flux
// engine, Flux's controllers, and the no-change plan.
func fluxMarkdown(points []curvePoint) string {
	var b strings.Builder
	b.WriteString("\nThe two delivery engines: direct (the provider applies to every workload cluster) and Flux (the provider publishes to the OCI registry and writes one Kustomization per Cluster; Flux's controllers deliver).\n\n")
	b.WriteString("| Clusters | engine | first apply | provider CPU (apply) | provider CPU per cluster | provider peak RSS (apply) | Flux controllers CPU (apply) | Flux controllers peak RSS | no-change plan | revision change: plan | kubectl apply + wait | apply / kubectl |\n")
	b.WriteString("|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, pt := range points {
		r := pt.row()
		fmt.Fprintf(&b, "| %s | %s | %s s | %s s | %s s | %s MiB | %s | %s | %s s | %s s | %s | %s |\n",
			r[0], r[20], r[3], r[4], r[5], r[13], withUnit(r[21]), withMiB(r[22]), r[6], r[18], withUnit(r[10]), r[11])
	}
	return b.String()
}

// withMiB adds " MiB" to a size, not to "-".
func withMiB(v string) string {
	if v == "-" {
		return v
	}
	return v + " MiB"
}

func cpuModel() string {
	raw, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	raw, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	return "unknown RAM"
}

// curve runs the curve and writes it: CSV on stdout and to --csv, the table to --markdown.
func curve(ctx context.Context, c config, f *testbed.Fleet, logf func(string, ...any), stdout io.Writer) error {
	sizes, err := parseSizes(c.sizes)
	if err != nil {
		return err
	}
	points, err := runCurve(ctx, c, f, sizes, logf)
	if len(points) > 0 {
		servers := map[string]bool{}
		for _, w := range f.Workloads {
			if w.Server != "" {
				servers[w.Server] = true
			}
		}
		cli := cliVersion(ctx, c.tofu)
		csv, md := curveCSV(points, cli), curveMarkdown(points, len(servers), cli)
		_, _ = io.WriteString(stdout, "\n"+csv+"\n"+md)
		for file, text := range map[string]string{c.csv: csv, c.markdown: md} {
			if file == "" {
				continue
			}
			if werr := os.WriteFile(file, []byte(text), 0o644); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	return err
}

// cliVersion is what `CLI version` says it is ("OpenTofu v1.12.6", "Terraform v1.11.4"), or the
// binary's name. The line is looked for: the CLI may print warnings first (a missing CLI
// configuration file, say).
func cliVersion(ctx context.Context, bin string) string {
	out, _ := exec.CommandContext(ctx, bin, "version").Output()
	if m := cliVersionLine.FindString(string(out)); m != "" {
		return m
	}
	return filepath.Base(bin)
}

var cliVersionLine = regexp.MustCompile(`(?m)^(OpenTofu|Terraform) v\d+\.\d+\.\d+\S*`)
