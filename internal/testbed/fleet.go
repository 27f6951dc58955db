package testbed

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

const (
	stateFile = "fleet.json"
	// DefaultNamespace holds the Cluster objects unless Options.Namespace says otherwise.
	DefaultNamespace = "fleet"
	defaultNodes     = 2
	defaultParallel  = 4
	// clusterTimeout bounds one control plane's start, readiness and preparation.
	clusterTimeout = 5 * time.Minute
	// apiReadyTimeout bounds the wait for a started API server's /readyz. A kube-apiserver
	// is ready in seconds on an idle machine, but a bed started while builds and other fleets
	// share two cores has taken over a minute.
	apiReadyTimeout = 3 * time.Minute
)

// WorkloadSpec says what one workload cluster looks like to CAPI.
type WorkloadSpec struct {
	// Name of the CAPI Cluster (and of its <name>-kubeconfig Secret).
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Ready: phase Provisioned, initialization done, Available/ControlPlaneAvailable/
	// InfrastructureReady True. Otherwise phase Provisioning and those False.
	Ready bool `json:"ready"`
	// Paused sets spec.paused (and the Paused condition).
	Paused bool `json:"paused,omitempty"`
	// Nodes is the number of kwok fake Nodes; 0 means 2.
	Nodes int `json:"nodes,omitempty"`
	// NoKubeconfig: the Cluster object only, no <name>-kubeconfig Secret and no control plane.
	NoKubeconfig bool `json:"noKubeconfig,omitempty"`
	// ExecKubeconfig: no control plane; the Secret holds a kubeconfig that asks to exec a
	// credential plugin (which a rollout must refuse for workload clusters).
	ExecKubeconfig bool `json:"execKubeconfig,omitempty"`
	// KubernetesVersion, when set, goes to spec.topology.version (class "gradual-testbed").
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// SharesWith names another workload of the same fleet whose control plane this Cluster uses
	// (no control plane of its own): how a few kwok API servers present many Clusters. See scale.go.
	SharesWith string `json:"sharesWith,omitempty"`
	// ClusterAPI: the fleet's Cluster API controllers (Options.ClusterAPI) reconcile the Cluster,
	// as if they had provisioned it, while its API server is a kwok one (capimanaged.go).
	ClusterAPI bool `json:"clusterAPI,omitempty"`
}

// hasControlPlane reports whether the workload gets a kwok cluster of its own.
func (s WorkloadSpec) hasControlPlane() bool {
	return !s.NoKubeconfig && !s.ExecKubeconfig && s.SharesWith == ""
}

// Options for Up.
type Options struct {
	// Namespace of the Cluster objects and Secrets; default "fleet".
	Namespace string
	Workloads []WorkloadSpec
	// Dir holds the state file, kubeconfigs, logs and the KWOK_WORKDIR. Default: a new temp dir.
	// It must not already hold a fleet.
	Dir string
	// Parallel is how many control planes start at once; default 4 (on 2 cores, 1+3 clusters come
	// up in ~8 s with 4, ~12 s with 2, ~17 s with 1: much of a start is waiting, not CPU).
	Parallel int
	// Logf receives progress lines; default: discarded.
	Logf func(format string, args ...any)
	// ClusterAPI also starts the real Cluster API controllers (core, kubeadm bootstrap and
	// control plane, CAPD in-memory) and CAPI's test extension as local processes, watching
	// ClusterAPINamespace only (see Fleet.ClusterAPI). Needs `tools/toolchain.sh cluster-api`.
	ClusterAPI bool
	// ClusterAPINamespace: default "capi"; must differ from Namespace.
	ClusterAPINamespace string
	// InPlaceUpdatesOff (with ClusterAPI) starts the core and KubeadmControlPlane managers with
	// Cluster API's InPlaceUpdates feature gate off, its default in v1.14, instead of on: Cluster
	// API then replaces machines whatever the update extensions cover.
	InPlaceUpdatesOff bool
	// Flux also starts Flux's source-controller and kustomize-controller as local processes
	// against the management cluster (all namespaces), with their CRDs, and an in-memory OCI
	// registry on loopback (see Fleet.Flux). Needs `tools/toolchain.sh flux`.
	Flux bool
	// FluxNamespace is the controllers' RUNTIME_NAMESPACE; default "flux-system".
	FluxNamespace string
	// FluxConcurrent is both controllers' --concurrent (how many objects each reconciles at
	// once); 0 keeps their default (4), as a fresh Flux install runs. A fleet of a thousand
	// clusters needs more: each Kustomization holds a worker for at least the 5 s of its first
	// health check.
	FluxConcurrent int

	ephemeral bool // set by Start: the fleet may be reaped once its test process is gone
}

// Cluster is one kwok control plane (or, for NoKubeconfig/ExecKubeconfig workloads, none).
type Cluster struct {
	// Name is the CAPI Cluster name; "management" for the management cluster.
	Name string `json:"name"`
	// KwokName is the kwokctl cluster name; empty when no control plane was started.
	KwokName string `json:"kwokName,omitempty"`
	// KubeconfigPath is an admin kubeconfig with inline client-certificate credentials.
	KubeconfigPath string `json:"kubeconfigPath,omitempty"`
	// Server is the API server URL (https://127.0.0.1:PORT).
	Server string `json:"server,omitempty"`
}

// Workload is a workload cluster: its control plane and what CAPI says about it.
type Workload struct {
	Cluster
	Spec WorkloadSpec `json:"spec"`
}

// Fleet is a running test bed. Its fields are saved in DIR/fleet.json after every change.
type Fleet struct {
	Name       string               `json:"name"`
	Dir        string               `json:"dir"`
	Namespace  string               `json:"namespace"`
	Management Cluster              `json:"management"`
	Workloads  map[string]*Workload `json:"workloads"`
	Toolchain  Toolchain            `json:"toolchain"`
	Created    time.Time            `json:"created"`
	// Ephemeral fleets belong to a test process (see Start) and are reaped once it is gone.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// ClusterAPI: the real controllers, when started with Options.ClusterAPI; nil otherwise.
	ClusterAPI *ClusterAPI `json:"clusterAPI,omitempty"`
	// Flux: its controllers and the OCI registry, when started with Options.Flux; nil otherwise.
	Flux *Flux `json:"flux,omitempty"`

	mu       sync.Mutex
	kwok     *kwokctl
	logf     func(string, ...any)
	parallel int
	lock     *os.File // Start's liveness lock; nil otherwise
}

// Up starts a management cluster and the workload clusters, fills the management cluster with
// CAPI's CRDs, the Cluster objects and kubeconfig Secrets, and saves the state in opts.Dir.
// On error it tears down whatever it started.
func Up(ctx context.Context, tc Toolchain, opts Options) (_ *Fleet, err error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if errs := validation.IsDNS1123Label(opts.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %v", opts.Namespace, errs)
	}
	if opts.ClusterAPI {
		if err := checkClusterAPIOptions(tc, &opts); err != nil {
			return nil, err
		}
	}
	if opts.Flux {
		if err := checkFluxOptions(tc, &opts); err != nil {
			return nil, err
		}
	}
	opts.Workloads = slices.Clone(opts.Workloads) // validate fills defaults; the caller's slice stays as it was
	seen := map[string]bool{}
	for i := range opts.Workloads {
		if err := opts.Workloads[i].validate(); err != nil {
			return nil, err
		}
		if seen[opts.Workloads[i].Name] {
			return nil, fmt.Errorf("workload %q listed twice", opts.Workloads[i].Name)
		}
		seen[opts.Workloads[i].Name] = true
	}
	if err := checkShared(opts.Workloads); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		if opts.Dir, err = os.MkdirTemp("", "gradual-testbed-"); err != nil {
			return nil, err
		}
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, stateFile)); err == nil {
		return nil, fmt.Errorf("%s already holds a fleet; tear it down first (gradual-testbed down --dir %s)", opts.Dir, opts.Dir)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}

	f := &Fleet{
		Name:      "gt-" + randomSuffix(),
		Dir:       opts.Dir,
		Namespace: opts.Namespace,
		Management: Cluster{
			Name: "management",
		},
		Workloads: map[string]*Workload{},
		Toolchain: tc,
		Created:   clock.System{}.Now().UTC().Truncate(time.Second),
		Ephemeral: opts.ephemeral,
		parallel:  max(opts.Parallel, 1),
		logf:      opts.Logf,
	}
	if opts.Parallel == 0 {
		f.parallel = defaultParallel
	}
	if f.logf == nil {
		f.logf = func(string, ...any) {}
	}
	for _, s := range opts.Workloads {
		s.Labels = copyMap(s.Labels)
		f.Workloads[s.Name] = &Workload{Cluster: Cluster{Name: s.Name}, Spec: s}
	}
	if f.kwok, err = newKwokctl(tc, f.Dir); err != nil {
		return nil, err
	}
	if err := f.save(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.logf("up failed, tearing down fleet %s: %v", f.Name, err)
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if derr := f.Down(dctx); derr != nil {
				err = errors.Join(err, fmt.Errorf("tear down after failed up: %w", derr))
			}
		}
	}()

	start := clock.System{}.Now()
	f.logf("fleet %s: starting management + %d workload control planes (%d at a time) in %s", f.Name, len(opts.Workloads), f.parallel, f.Dir)
	tasks := []func(context.Context) error{f.startManagement}
	for _, s := range opts.Workloads {
		w := f.Workloads[s.Name]
		if s.hasControlPlane() {
			tasks = append(tasks, func(ctx context.Context) error { return f.startWorkload(ctx, w) })
		}
	}
	if err := runLimited(ctx, f.parallel, tasks); err != nil {
		return nil, err
	}
	if err := f.update(f.linkShared); err != nil {
		return nil, err
	}
	if opts.ClusterAPI {
		if err := f.startClusterAPI(ctx, opts.ClusterAPINamespace, opts.InPlaceUpdatesOff); err != nil {
			return nil, err
		}
	}
	if opts.Flux {
		if err := f.startFlux(ctx, opts.FluxNamespace, opts.FluxConcurrent); err != nil {
			return nil, err
		}
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return nil, err
	}
	// Thousands of Clusters take a few requests each: in parallel, as many as the management
	// API server takes without queueing.
	var objects []func(context.Context) error
	for _, s := range opts.Workloads {
		w := f.Workloads[s.Name]
		objects = append(objects, func(ctx context.Context) error { return f.applyWorkloadObjects(ctx, mc, w) })
	}
	if err := runLimited(ctx, objectsParallel, objects); err != nil {
		return nil, err
	}
	f.logf("fleet %s: up in %s", f.Name, time.Since(start).Round(100*time.Millisecond))
	return f, f.save()
}

func (s *WorkloadSpec) validate() error {
	if errs := validation.IsDNS1123Label(s.Name); len(errs) > 0 {
		return fmt.Errorf("workload name %q: %v", s.Name, errs)
	}
	if s.NoKubeconfig && s.ExecKubeconfig {
		return fmt.Errorf("workload %q: NoKubeconfig and ExecKubeconfig exclude each other", s.Name)
	}
	if s.Nodes < 0 {
		return fmt.Errorf("workload %q: negative node count", s.Name)
	}
	if s.Nodes == 0 {
		s.Nodes = defaultNodes
	}
	return nil
}

// controlPlaneAttempts bounds the starts of one control plane whose components exit while it
// comes up: each start picks new ports, so one taken in between costs one more start, not the bed.
const controlPlaneAttempts = 3

// startControlPlane creates the kwok cluster for c, writes its self-contained kubeconfig, and
// runs prepare (nil for none) once its API server is ready. When one of its components exits
// meanwhile, the cluster is deleted and started again on new ports.
// The kwokctl name is saved before kwokctl runs, so Down finds it even if Up dies midway.
func (f *Fleet) startControlPlane(ctx context.Context, c *Cluster, kwokName, kubeconfigPath, kubeContext string, prepare func(context.Context, *rest.Config, func() error) error) error {
	if err := f.update(func() { c.KwokName = kwokName }); err != nil {
		return err
	}
	var err error
	for attempt := 1; attempt <= controlPlaneAttempts; attempt++ {
		var exited bool
		exited, err = f.startControlPlaneOnce(ctx, c, kwokName, kubeconfigPath, kubeContext, prepare)
		if err == nil || !exited || ctx.Err() != nil || attempt == controlPlaneAttempts {
			break
		}
		f.logf("cluster %s: %v; starting it once more on new ports", c.Name, err)
		if derr := f.stopControlPlane(ctx, kwokName); derr != nil {
			return errors.Join(err, derr)
		}
	}
	return err
}

// startControlPlaneOnce is one start of startControlPlane. exited says whether it failed because a
// component exited (worth another start) rather than for another reason.
func (f *Fleet) startControlPlaneOnce(ctx context.Context, c *Cluster, kwokName, kubeconfigPath, kubeContext string, prepare func(context.Context, *rest.Config, func() error) error) (exited bool, err error) {
	t0 := clock.System{}.Now()
	if err := f.kwok.create(ctx, kwokName); err != nil {
		return false, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	raw, server, err := adminKubeconfig(f.kwok.kubeconfigPath(kwokName), kwokName, c.Name, kubeContext)
	if err != nil {
		return false, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	if err := writePrivate(kubeconfigPath, raw); err != nil {
		return false, err
	}
	if err := f.update(func() { c.KubeconfigPath, c.Server = kubeconfigPath, server }); err != nil {
		return false, err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return false, err
	}
	var gone error
	running := func() error {
		gone = f.kwok.exited(kwokName)
		return gone
	}
	if err := waitAPIReady(ctx, cfg, apiReadyTimeout, running); err != nil {
		return gone != nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	f.logf("cluster %s (kwok %s) serving at %s after %s", c.Name, kwokName, server, time.Since(t0).Round(100*time.Millisecond))
	if prepare != nil {
		if err := prepare(ctx, cfg, running); err != nil {
			return gone != nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	return false, nil
}

func (f *Fleet) startManagement(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	if err := f.startControlPlane(ctx, &f.Management, f.Name, filepath.Join(f.Dir, "management.kubeconfig"), ManagementContext, nil); err != nil {
		return err
	}
	t0 := clock.System{}.Now()
	c, err := f.ManagementClient()
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, c); err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	if err := applyNamespace(ctx, c, f.Namespace); err != nil {
		return fmt.Errorf("management cluster: namespace %s: %w", f.Namespace, err)
	}
	f.logf("management cluster: CAPI %s CRDs established, namespace %s, after %s", CAPIVersion, f.Namespace, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

func (f *Fleet) startWorkload(ctx context.Context, w *Workload) error {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	path := filepath.Join(f.Dir, "kubeconfigs", w.Spec.Name+".kubeconfig")
	prepare := func(ctx context.Context, cfg *rest.Config, running func() error) error {
		return prepareWorkload(ctx, cfg, w.Spec.Nodes, running)
	}
	return f.startControlPlane(ctx, &w.Cluster, f.Name+"-"+w.Spec.Name, path, "", prepare)
}

// AddWorkload starts one more workload cluster (unless the spec needs no control plane) and
// registers it in the management cluster: a cluster joining the fleet.
func (f *Fleet) AddWorkload(ctx context.Context, spec WorkloadSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if spec.SharesWith != "" {
		return fmt.Errorf("workload %q: AddWorkload starts a control plane of its own; SharesWith is for Up", spec.Name)
	}
	spec.Labels = copyMap(spec.Labels)
	w := &Workload{Cluster: Cluster{Name: spec.Name}, Spec: spec}
	var exists bool
	if err := f.update(func() {
		if _, exists = f.Workloads[spec.Name]; !exists {
			f.Workloads[spec.Name] = w
		}
	}); err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("workload %q already exists in fleet %s", spec.Name, f.Name)
	}
	if spec.hasControlPlane() {
		if err := f.startWorkload(ctx, w); err != nil {
			return err
		}
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	return f.applyWorkloadObjects(ctx, mc, w)
}

// RemoveWorkload deletes a workload's CAPI objects and stops its control plane: a cluster
// leaving the fleet.
func (f *Fleet) RemoveWorkload(ctx context.Context, name string) error {
	w, err := f.workload(name)
	if err != nil {
		return err
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	if err := f.deleteWorkloadObjects(ctx, mc, name); err != nil {
		return err
	}
	if w.KwokName != "" {
		if err := f.stopControlPlane(ctx, w.KwokName); err != nil {
			return err
		}
	}
	if w.KubeconfigPath != "" && w.Spec.SharesWith == "" {
		_ = os.Remove(w.KubeconfigPath)
	}
	return f.update(func() { delete(f.Workloads, name) })
}

// SetReady flips a workload between provisioned-and-available and provisioning.
func (f *Fleet) SetReady(ctx context.Context, name string, ready bool) error {
	return f.changeSpec(ctx, name, func(s *WorkloadSpec) { s.Ready = ready })
}

// SetLabels replaces a workload Cluster's labels.
func (f *Fleet) SetLabels(ctx context.Context, name string, labels map[string]string) error {
	return f.changeSpec(ctx, name, func(s *WorkloadSpec) { s.Labels = copyMap(labels) })
}

// SetPaused sets or clears a workload Cluster's spec.paused.
func (f *Fleet) SetPaused(ctx context.Context, name string, paused bool) error {
	return f.changeSpec(ctx, name, func(s *WorkloadSpec) { s.Paused = paused })
}

func (f *Fleet) changeSpec(ctx context.Context, name string, change func(*WorkloadSpec)) error {
	w, err := f.workload(name)
	if err != nil {
		return err
	}
	if err := f.update(func() { change(&w.Spec) }); err != nil {
		return err
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	return f.applyWorkloadObjects(ctx, mc, w)
}

func (f *Fleet) workload(name string) (*Workload, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.Workloads[name]
	if !ok {
		return nil, fmt.Errorf("fleet %s has no workload %q", f.Name, name)
	}
	return w, nil
}

// ManagementClient is a controller-runtime client for the management cluster (see Scheme).
func (f *Fleet) ManagementClient() (client.Client, error) {
	cfg, err := f.Management.RESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

// WorkloadClient is a controller-runtime client for a workload cluster with a control plane.
func (f *Fleet) WorkloadClient(name string) (client.Client, error) {
	w, err := f.workload(name)
	if err != nil {
		return nil, err
	}
	cfg, err := w.RESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

// ServerVersion asks a cluster's API server for /version (GitVersion).
func ServerVersion(c Cluster) (string, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return "", fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return v.GitVersion, nil
}

// KwokWorkdir is the KWOK_WORKDIR that holds this fleet's kwokctl clusters and nothing else.
func (f *Fleet) KwokWorkdir() string { return filepath.Join(f.Dir, "kwok") }

// Processes lists the live processes (etcd, apiserver, ...) of the fleet's control planes.
func (f *Fleet) Processes() map[string][]int {
	out := map[string][]int{}
	for _, name := range f.kwokNames() {
		if pids := f.kwok.processes(name); len(pids) > 0 {
			out[name] = pids
		}
	}
	return out
}

func (f *Fleet) kwokNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	if f.Management.KwokName != "" {
		names = append(names, f.Management.KwokName)
	}
	for _, w := range f.Workloads {
		if w.KwokName != "" {
			names = append(names, w.KwokName)
		}
	}
	slices.Sort(names)
	return names
}

// Down stops every control plane this fleet started, and nothing else: the clusters named in its
// state, plus any other cluster in its own KWOK_WORKDIR (one whose create was interrupted before
// the state was saved). Then it removes the fleet's files. Safe to call twice.
func (f *Fleet) Down(ctx context.Context) error {
	if f.kwok == nil {
		k, err := newKwokctl(f.Toolchain, f.Dir)
		if err != nil {
			return err
		}
		f.kwok = k
	}
	var errs []error
	// The controllers first: with the management API server gone they would only log errors.
	if err := f.stopClusterAPI(); err != nil {
		errs = append(errs, err)
	}
	if err := f.stopFlux(); err != nil {
		errs = append(errs, err)
	}
	names := f.kwokNames()
	listed, err := f.kwok.list(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range listed {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, name := range names {
		if err := f.stopControlPlane(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	if left, err := f.kwok.list(ctx); err == nil && len(left) > 0 {
		errs = append(errs, fmt.Errorf("kwokctl still lists %v in %s", left, f.kwok.workdir))
	}
	if len(errs) > 0 {
		return fmt.Errorf("fleet %s: %w", f.Name, errors.Join(errs...))
	}
	for _, p := range []string{stateFile, "kwok", "bin", "logs", "kubeconfigs", "management.kubeconfig", "fleet.lock", clusterAPIDir, fluxDir} {
		if err := os.RemoveAll(filepath.Join(f.Dir, p)); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(f.Dir) // only if empty: Dir may be the caller's
	if f.lock != nil {
		_ = f.lock.Close()
		f.lock = nil
	}
	f.logf("fleet %s: down", f.Name)
	return errors.Join(errs...)
}

// stopControlPlane deletes one kwokctl cluster and makes sure its processes are gone.
func (f *Fleet) stopControlPlane(ctx context.Context, kwokName string) error {
	dir := f.kwok.clusterDir(kwokName)
	pids := f.kwok.processes(kwokName)
	if _, err := os.Stat(dir); err == nil || len(pids) > 0 {
		if err := f.kwok.delete(ctx, kwokName); err != nil {
			// Fall through to the kill below; report only if processes survive it.
			f.logf("kwokctl delete %s: %v", kwokName, err)
		}
	}
	deadline := clock.System{}.Now().Add(10 * time.Second)
	for {
		alive := slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !ownedAlive(pid, dir) })
		if len(alive) == 0 {
			return nil
		}
		if (clock.System{}).Now().After(deadline) {
			killOwned(alive, dir)
			time.Sleep(200 * time.Millisecond)
			if alive = slices.DeleteFunc(alive, func(pid int) bool { return !ownedAlive(pid, dir) }); len(alive) > 0 {
				return fmt.Errorf("cluster %s: processes %v survive SIGKILL", kwokName, alive)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Load reads the fleet that Up saved in dir.
func Load(dir string) (*Fleet, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no fleet in %s: %w", dir, err)
	}
	f := &Fleet{}
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, stateFile), err)
	}
	if f.Dir != dir {
		return nil, fmt.Errorf("%s describes a fleet in %s, not %s; it was moved, tear it down from there", stateFile, f.Dir, dir)
	}
	if f.Workloads == nil {
		f.Workloads = map[string]*Workload{}
	}
	f.logf = func(string, ...any) {}
	f.parallel = defaultParallel
	if f.kwok, err = newKwokctl(f.Toolchain, f.Dir); err != nil {
		return nil, err
	}
	return f, nil
}

// SetLogf directs progress lines (e.g. of a loaded fleet) to logf.
func (f *Fleet) SetLogf(logf func(string, ...any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logf = logf
}

// update changes the fleet under its lock and saves it.
func (f *Fleet) update(change func()) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
	return f.saveLocked()
}

func (f *Fleet) save() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saveLocked()
}

func (f *Fleet) saveLocked() error {
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	// A temporary file of its own: test binaries sharing a fleet (make testacc) may save at once.
	tmp, err := os.CreateTemp(f.Dir, stateFile+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after a failed write
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(f.Dir, stateFile))
}

// runLimited runs tasks with at most n at once; the first error cancels the rest and is the one
// returned (the others see only the cancellation).
func runLimited(ctx context.Context, n int, tasks []func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, task := range tasks {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return task(gctx) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// hostPort splits https://HOST:PORT.
func hostPort(server string) (string, int32, bool) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return "", 0, false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return "", 0, false
	}
	return host, int32(p), true
}
