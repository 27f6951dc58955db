// Command gradual-testbed starts and stops a local fleet for the demo and for people: a management
// cluster holding Cluster API objects and kwok workload clusters (see internal/testbed).
//
//	gradual-testbed up     [--dir DIR] [--workloads 3] [--clusters N] [--namespace fleet] [--parallel 4] [--cluster-api [--in-place-updates-off]] [--flux]   # last stdout line: management kubeconfig
//	gradual-testbed down   [--dir DIR]
//	gradual-testbed status [--dir DIR]
//	gradual-testbed in-memory [--dir DIR] NAME[:key=value,...]...   # with --cluster-api: clusters CAPI provisions
//	gradual-testbed kubelet [--dir DIR] [CLUSTER...]                 # the kubelet stand-in, until stopped
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gradual-testbed:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

const usage = `usage: gradual-testbed <command> [flags]

  up      start a management cluster and workload clusters; prints the management kubeconfig
          path as the last line of stdout (progress goes to stderr). Idempotent: a fleet that is
          already up in DIR is reused.
  down    stop exactly what up started in DIR and remove its files
  status  show the fleet in DIR and whether its API servers answer
  set-ready NAME true|false      mark a Cluster provisioned (ready) or provisioning
  add NAME [key=value,...]       start one more workload cluster with those labels (a join)
  machines CLUSTER NAME N VERSION  a MachineDeployment of N Machines on CLUSTER's kwok Nodes
  in-memory NAME[:key=value,...]...  (fleets up --cluster-api) clusters Cluster API provisions on
                                   CAPD's in-memory backend, labelled so, rolled out in place
                                   (maxSurge 0); registers CAPI's test extension as test-extension
  kubelet [CLUSTER...]             (fleets up --cluster-api) the kubelet stand-in: a worker's Node
                                   reports its Machine's version after an in-place update, as a
                                   restarted kubelet would; runs until stopped (all clusters when
                                   none is named)

flags:
  --dir DIR          state directory (default ~/.cache/terraform-provider-gradual/testbed/default)
  --workloads N      up: number of workload clusters (default 3: prod-eu-1, prod-us-1, staging-eu-1)
  --clusters N       up: the scale bed: N CAPI Clusters (labelled env=scale) over --workloads kwok
                     API servers (scale-api-1.., then c-0004.. sharing them); e.g. --clusters 1000
  --namespace NS     up: namespace of the Cluster objects (default fleet)
  --parallel N       up: control planes started at once (default 4)
  --cluster-api      up: also run the real Cluster API controllers (core, kubeadm bootstrap and
                     control plane, CAPD in-memory) and CAPI's test extension; they reconcile only
                     objects labelled cluster.x-k8s.io/watch-filter=gradual-testbed, webhooks apply
                     in namespace capi (build them first: tools/toolchain.sh cluster-api); the
                     managers' HTTPS_PROXY is a proxy that stands in for cluster DNS, reaching
                     <name>.<namespace>.svc:<port> at a ready endpoint of that Service (for
                     ExtensionConfigs registered by service)
  --in-place-updates-off
                     up --cluster-api: run the core and KubeadmControlPlane managers with Cluster
                     API's InPlaceUpdates feature gate off (its default in v1.14): machines are
                     replaced, never updated in place
  --flux             up: also run Flux's source-controller and kustomize-controller against the
                     management cluster (RUNTIME_NAMESPACE flux-system, all namespaces watched)
                     and an in-memory OCI registry on loopback (plain HTTP; OCIRepositories need
                     insecure: true) (build them first: tools/toolchain.sh flux)
  --flux-concurrent N  with --flux: both controllers' --concurrent (default: theirs, 4); a
                     fleet of a thousand clusters wants more
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	dir := fs.String("dir", "", "state directory")
	workloads := fs.Int("workloads", 3, "number of workload clusters")
	namespace := fs.String("namespace", testbed.DefaultNamespace, "namespace of the Cluster objects")
	parallel := fs.Int("parallel", 4, "control planes started at once")
	clusterAPI := fs.Bool("cluster-api", false, "also run the real Cluster API controllers")
	inPlaceOff := fs.Bool("in-place-updates-off", false, "with --cluster-api: Cluster API's InPlaceUpdates feature gate off")
	flux := fs.Bool("flux", false, "also run Flux's source-controller and kustomize-controller and an OCI registry")
	fluxConcurrent := fs.Int("flux-concurrent", 0, "with --flux: the controllers' --concurrent (0: their default)")
	clusters := fs.Int("clusters", 0, "scale bed: CAPI Clusters over --workloads API servers")
	solo := fs.Int("solo", 0, "scale bed: the last N API servers serve one Cluster each (the others share the rest)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 && !slices.Contains([]string{"set-ready", "add", "machines", "in-memory", "kubelet"}, cmd) {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *dir == "" {
		cache, err := testbed.CacheDir()
		if err != nil {
			return err
		}
		*dir = filepath.Join(cache, "testbed", "default")
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "[testbed %s] %s\n", clock.System{}.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	switch cmd {
	case "up":
		specs := defaultWorkloads(*workloads)
		if *clusters > 0 {
			var err error
			if specs, err = testbed.ScaleWorkloads(*clusters, *workloads, *solo); err != nil {
				return err
			}
		}
		return up(ctx, *dir, testbed.Options{
			Namespace: *namespace, Workloads: specs, Parallel: *parallel, ClusterAPI: *clusterAPI, InPlaceUpdatesOff: *inPlaceOff, Flux: *flux, FluxConcurrent: *fluxConcurrent, Logf: logf,
		}, stdout)
	case "down":
		f, err := testbed.Load(*dir)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				logf("no fleet in %s; nothing to do", *dir)
				return nil
			}
			return err
		}
		f.SetLogf(logf)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		return f.Down(ctx)
	case "status":
		return status(ctx, *dir, stdout)
	case "in-memory", "kubelet":
		f, err := testbed.Load(*dir)
		if err != nil {
			return err
		}
		f.SetLogf(logf)
		return clusterAPICommand(ctx, f, cmd, fs.Args(), logf)
	case "set-ready", "add", "machines":
		f, err := testbed.Load(*dir)
		if err != nil {
			return err
		}
		f.SetLogf(logf)
		return change(ctx, f, cmd, fs.Args())
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// change runs the commands that change a running fleet: `set-ready NAME true|false` flips a
// Cluster between provisioned and provisioning; `add NAME [key=value,...]` starts one more
// workload cluster with those labels (a cluster joining the fleet); `machines CLUSTER NAME
// REPLICAS VERSION` gives a cluster a MachineDeployment whose Machines are its kwok Nodes.
func change(ctx context.Context, f *testbed.Fleet, cmd string, args []string) error {
	switch {
	case cmd == "set-ready" && len(args) == 2 && (args[1] == "true" || args[1] == "false"):
		return f.SetReady(ctx, args[0], args[1] == "true")
	case cmd == "machines" && len(args) == 4:
		replicas, err := strconv.Atoi(args[2])
		if err != nil {
			return fmt.Errorf("replicas %q: %w", args[2], err)
		}
		_, err = f.AddMachineDeployment(ctx, testbed.MachineDeploymentSpec{Cluster: args[0], Name: args[1], Replicas: replicas, Version: args[3]})
		return err
	case cmd == "add" && (len(args) == 1 || len(args) == 2):
		labels := map[string]string{}
		if len(args) == 2 {
			for _, kv := range strings.Split(args[1], ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("label %q: want key=value", kv)
				}
				labels[k] = v
			}
		}
		return f.AddWorkload(ctx, testbed.WorkloadSpec{Name: args[0], Labels: labels, Ready: true})
	}
	return fmt.Errorf("usage: %s %s", cmd, map[string]string{
		"set-ready": "NAME true|false", "add": "NAME [key=value,...]", "machines": "CLUSTER NAME REPLICAS VERSION",
	}[cmd])
}

// DefaultWorkloads is the demo fleet; more than three get names workload-4, workload-5, ...
func defaultWorkloads(n int) []testbed.WorkloadSpec {
	base := []testbed.WorkloadSpec{
		{Name: "prod-eu-1", Labels: map[string]string{"env": "prod", "region": "eu"}, Ready: true},
		{Name: "prod-us-1", Labels: map[string]string{"env": "prod", "region": "us"}, Ready: true},
		{Name: "staging-eu-1", Labels: map[string]string{"env": "staging", "region": "eu"}, Ready: true},
	}
	if n <= len(base) {
		return base[:max(n, 0)]
	}
	for i := len(base); i < n; i++ {
		base = append(base, testbed.WorkloadSpec{
			Name: fmt.Sprintf("workload-%d", i+1), Labels: map[string]string{"env": "dev"}, Ready: true,
		})
	}
	return base
}

func up(ctx context.Context, dir string, opts testbed.Options, stdout io.Writer) error {
	logf := opts.Logf
	if f, err := testbed.Load(dir); err == nil {
		if err := testbed.Check(ctx, f.Management); err == nil && (f.ClusterAPI != nil) == opts.ClusterAPI && (f.ClusterAPI == nil || f.ClusterAPI.InPlaceUpdatesOff == opts.InPlaceUpdatesOff) && (f.Flux != nil) == opts.Flux && (f.Flux == nil || f.Flux.Concurrent == opts.FluxConcurrent) {
			logf("fleet %s is already up in %s", f.Name, dir)
			fmt.Fprintln(stdout, f.Management.KubeconfigPath)
			return nil
		}
		logf("fleet %s in %s does not answer or differs in --cluster-api, --in-place-updates-off, --flux or --flux-concurrent; replacing it", f.Name, dir)
		f.SetLogf(logf)
		if err := f.Down(ctx); err != nil {
			return err
		}
	}
	tc, err := testbed.ToolchainFromEnv()
	if err != nil {
		return err
	}
	opts.Dir = dir
	f, err := testbed.Up(ctx, tc, opts)
	if err != nil {
		return err
	}
	logf("management kubeconfig (context %q): %s", testbed.ManagementContext, f.Management.KubeconfigPath)
	if f.ClusterAPI != nil {
		logf("Cluster API controllers reconcile objects labelled cluster.x-k8s.io/watch-filter=%s, webhooks in namespace %s; logs in %s/logs; test extension at %s; Services reached through %s", f.ClusterAPI.WatchFilter, f.ClusterAPI.Namespace, f.ClusterAPI.Dir, f.ClusterAPI.TestExtensionURL, f.ClusterAPI.ServiceProxy)
	}
	if f.Flux != nil {
		logf("Flux controllers (RUNTIME_NAMESPACE %s) run against the management cluster; OCI registry at %s (plain HTTP); logs in %s/logs", f.Flux.Namespace, f.Flux.Registry, f.Flux.Dir)
	}
	logf("tear down with: gradual-testbed down --dir %s", dir)
	fmt.Fprintln(stdout, f.Management.KubeconfigPath)
	return nil
}

func status(ctx context.Context, dir string, stdout io.Writer) error {
	f, err := testbed.Load(dir)
	if err != nil {
		return err
	}
	procs := f.Processes()
	fmt.Fprintf(stdout, "fleet %s in %s (namespace %s, created %s)\n\n", f.Name, f.Dir, f.Namespace, f.Created.Format(time.RFC3339))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tKWOK NAME\tSERVER\tPROCESSES\tAPI\tREADY\tLABELS")
	row := func(c testbed.Cluster, ready, labels string) {
		api := "-"
		if c.KubeconfigPath != "" {
			api = "ok"
			if err := testbed.Check(ctx, c); err != nil {
				api = "down"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", c.Name, dash(c.KwokName), dash(c.Server), len(procs[c.KwokName]), api, ready, labels)
	}
	row(f.Management, "-", "-")
	for _, name := range slices.Sorted(maps.Keys(f.Workloads)) {
		w := f.Workloads[name]
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(w.Spec.Labels)) {
			labels = append(labels, k+"="+w.Spec.Labels[k])
		}
		ready := fmt.Sprint(w.Spec.Ready)
		switch {
		case w.Spec.NoKubeconfig:
			ready += " (no kubeconfig)"
		case w.Spec.ExecKubeconfig:
			ready += " (exec kubeconfig)"
		}
		if w.Spec.Paused {
			ready += " (paused)"
		}
		row(w.Cluster, ready, dash(strings.Join(labels, ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if f.ClusterAPI != nil {
		fmt.Fprintf(stdout, "\nCluster API controllers (namespace %s, logs in %s/logs):\n", f.ClusterAPI.Namespace, f.ClusterAPI.Dir)
		for _, p := range f.ClusterAPI.Processes {
			fmt.Fprintf(stdout, "  %-28s pid %-8d webhook :%d  health :%d\n", p.Name, p.PID, p.WebhookPort, p.HealthPort)
		}
	}
	if f.Flux != nil {
		fmt.Fprintf(stdout, "\nFlux (namespace %s, OCI registry %s, artifacts http://%s, logs in %s/logs):\n", f.Flux.Namespace, f.Flux.Registry, f.Flux.ArtifactAddr, f.Flux.Dir)
		for _, p := range f.Flux.Processes {
			fmt.Fprintf(stdout, "  %-28s pid %-8d ready %s\n", p.Name, p.PID, p.ReadyURL)
		}
	}
	fmt.Fprintf(stdout, "\nmanagement kubeconfig: %s\n", f.Management.KubeconfigPath)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clusterAPICommand runs the commands of a fleet with the Cluster API controllers: `in-memory`
// provisions clusters, `kubelet` plays the kubelets until ctx ends.
func clusterAPICommand(ctx context.Context, f *testbed.Fleet, cmd string, args []string, logf func(string, ...any)) error {
	if f.ClusterAPI == nil {
		return fmt.Errorf("fleet %s runs no Cluster API controllers: start it with up --cluster-api", f.Name)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	if cmd == "kubelet" {
		logf("kubelet stand-in running for %s in namespace %s", map[bool]string{true: "every cluster", false: strings.Join(args, ", ")}[len(args) == 0], f.ClusterAPI.Namespace)
		testbed.NewKubelet(args...).Run(ctx, mc, f.ClusterAPI.Namespace)
		return nil
	}
	if len(args) == 0 {
		return errors.New("usage: in-memory NAME[:key=value,...]...")
	}
	var clusters []testbed.InMemoryCluster
	for _, a := range args {
		name, labelList, _ := strings.Cut(a, ":")
		c := testbed.InMemoryCluster{Name: name, ControlPlaneVersion: "v1.34.2", WorkerVersion: "v1.34.0", InPlaceRollout: true, Labels: map[string]string{}}
		if labelList != "" {
			for _, kv := range strings.Split(labelList, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("label %q: want key=value", kv)
				}
				c.Labels[k] = v
			}
		}
		clusters = append(clusters, c)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := f.RegisterTestExtension(ctx, "test-extension"); err != nil {
		return err
	}
	t0 := clock.System{}.Now()
	if err := f.ProvisionInMemory(ctx, clusters...); err != nil {
		return err
	}
	logf("%d in-memory cluster(s) provisioned by Cluster API in %s (control plane v1.34.2, workers v1.34.0)", len(clusters), time.Since(t0).Round(time.Second))
	return nil
}
