package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

const (
	// DefaultFluxNamespace is the controllers' RUNTIME_NAMESPACE, where a test puts its Flux
	// objects (Options.FluxNamespace).
	DefaultFluxNamespace = "flux-system"
	// fluxDir is the fleet's sub-directory for Flux: source-controller's artifact storage, the
	// logs, and the processes' working directory (how Down recognises them).
	fluxDir = "flux"
	// fluxStartTimeout bounds the start of the controllers and the registry (warm: a few seconds).
	fluxStartTimeout = 2 * time.Minute
)

// FluxBinaries are Flux's controllers and CRDs that `tools/toolchain.sh flux` builds from the Go
// module proxy (see FluxVersion).
type FluxBinaries struct {
	SourceController    string `json:"sourceController,omitempty"`
	KustomizeController string `json:"kustomizeController,omitempty"`
	// CRDs is a directory of the CRD YAML files of both controllers' modules (config/crd/bases).
	CRDs string `json:"crds,omitempty"`
}

// FluxVersion names the controllers tools/toolchain.sh builds (FLUX_*_VERSION there).
const FluxVersion = "source-controller v1.9.6, kustomize-controller v1.9.6"

// missingFlux names what of FluxBinaries is absent, if anything.
func missingFlux(b FluxBinaries) []string {
	var missing []string
	for _, p := range []struct{ name, path string }{{"source-controller", b.SourceController}, {"kustomize-controller", b.KustomizeController}} {
		if p.path == "" || checkExecutable(p.path) != nil {
			missing = append(missing, p.name)
		}
	}
	if b.CRDs == "" {
		missing = append(missing, "CRDs")
	} else if files, _ := filepath.Glob(filepath.Join(b.CRDs, "*.yaml")); len(files) == 0 {
		missing = append(missing, "CRDs ("+b.CRDs+" holds none)")
	}
	return missing
}

// HasFlux reports whether the toolchain holds Flux's controllers and CRDs.
func (tc Toolchain) HasFlux() bool { return len(missingFlux(tc.Flux)) == 0 }

// Flux is the state of Flux's controllers of a fleet started with Options.Flux: source-controller
// and kustomize-controller as local processes against the management kube-apiserver, watching all
// namespaces, plus an in-memory OCI registry (plain HTTP on loopback) to publish artifacts to.
type Flux struct {
	// Namespace is the controllers' RUNTIME_NAMESPACE; it exists in the management cluster.
	Namespace string `json:"namespace"`
	// Dir holds storage/ (source-controller's artifacts), logs/<name>.log, and is the processes'
	// working directory.
	Dir string `json:"dir"`
	// ArtifactAddr is where source-controller serves (and advertises) its artifacts:
	// 127.0.0.1:PORT. kustomize-controller downloads from it.
	ArtifactAddr string `json:"artifactAddr"`
	// Registry is the OCI registry's host:port (127.0.0.1:PORT, plain HTTP: OCIRepositories need
	// spec.insecure true). It keeps everything in memory: a restart empties it.
	Registry string `json:"registry"`
	// Concurrent is the controllers' --concurrent, 0 for their default (Options.FluxConcurrent).
	Concurrent int        `json:"concurrent,omitempty"`
	Processes  []FluxProc `json:"processes"`
}

// FluxProc is one process of the Flux option.
type FluxProc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// ReadyURL answers 200 once the process is ready.
	ReadyURL string `json:"readyURL"`
	Log      string `json:"log"`
}

// RegistryURL is the oci:// address of a repository in the fleet's registry.
func (x *Flux) RegistryURL(repository string) string {
	return "oci://" + x.Registry + "/" + strings.TrimPrefix(repository, "/")
}

// checkFluxOptions fails before anything starts when the binaries are missing or the namespace
// is unusable; it fills in the default namespace.
func checkFluxOptions(tc Toolchain, opts *Options) error {
	if missing := missingFlux(tc.Flux); len(missing) > 0 {
		return fmt.Errorf("flux controllers missing (%s): run `tools/toolchain.sh flux` (cold: ~14 min on 2 cores)", strings.Join(missing, ", "))
	}
	if opts.FluxNamespace == "" {
		opts.FluxNamespace = DefaultFluxNamespace
	}
	if opts.FluxConcurrent < 0 {
		return fmt.Errorf("flux --concurrent %d: want 0 (the controllers' default) or more", opts.FluxConcurrent)
	}
	if errs := validation.IsDNS1123Label(opts.FluxNamespace); len(errs) > 0 {
		return fmt.Errorf("flux namespace %q: %v", opts.FluxNamespace, errs)
	}
	return nil
}

// fluxComponent is one Flux controller and its arguments.
type fluxComponent struct {
	name   string
	binary func(FluxBinaries) string
	// args beyond the common ones, given the artifact server address and storage path.
	args func(artifactAddr, storage string) []string
}

var fluxComponents = []fluxComponent{
	{
		// Serves the artifacts it builds from sources over HTTP on --storage-addr and writes
		// --storage-adv-addr into their status URLs; without leader election it starts that
		// server at once.
		name: "source-controller", binary: func(b FluxBinaries) string { return b.SourceController },
		args: func(artifactAddr, storage string) []string {
			return []string{"--storage-path=" + storage, "--storage-addr=" + artifactAddr, "--storage-adv-addr=" + artifactAddr}
		},
	},
	{
		name: "kustomize-controller", binary: func(b FluxBinaries) string { return b.KustomizeController },
		args: func(string, string) []string { return nil },
	},
}

// startFlux installs Flux's CRDs and namespace in the management cluster and starts the OCI
// registry and the two controllers, each on free loopback ports, then waits until they are ready.
func (f *Fleet) startFlux(ctx context.Context, namespace string, concurrent int) error {
	opts := Options{FluxNamespace: namespace}
	if err := checkFluxOptions(f.Toolchain, &opts); err != nil {
		return err
	}
	namespace = opts.FluxNamespace
	ctx, cancel := context.WithTimeout(ctx, fluxStartTimeout)
	defer cancel()
	t0 := clock.System{}.Now()
	dir := filepath.Join(f.Dir, fluxDir)
	storage := filepath.Join(dir, "storage")
	for _, d := range []string{storage, filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	ports, err := freePorts(2 + 2*len(fluxComponents))
	if err != nil {
		return err
	}
	state := &Flux{
		Namespace:    namespace,
		Dir:          dir,
		ArtifactAddr: "127.0.0.1:" + strconv.Itoa(ports[0]),
		Registry:     "127.0.0.1:" + strconv.Itoa(ports[1]),
		Concurrent:   concurrent,
	}
	if err := f.update(func() { f.Flux = state }); err != nil {
		return err
	}

	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	crds, err := readCRDDir(f.Toolchain.Flux.CRDs)
	if err != nil {
		return fmt.Errorf("flux: %w", err)
	}
	if err := installCRDObjects(ctx, mc, crds); err != nil {
		return fmt.Errorf("flux: %w", err)
	}
	if err := applyNamespace(ctx, mc, namespace); err != nil {
		return fmt.Errorf("flux: namespace %s: %w", namespace, err)
	}
	f.logf("flux: %d CRDs established, namespace %s, after %s", len(crds), namespace, time.Since(t0).Round(100*time.Millisecond))

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("flux: OCI registry: %w", err)
	}
	reg, err := f.startFluxProcess("oci-registry", self, nil, []string{ociRegistryEnv + "=" + state.Registry},
		"http://"+state.Registry+"/v2/")
	if err != nil {
		return err
	}
	if err := f.update(func() { state.Processes = append(state.Processes, reg) }); err != nil {
		return err
	}
	env := []string{"KUBECONFIG=" + f.Management.KubeconfigPath, "RUNTIME_NAMESPACE=" + namespace}
	for i, c := range fluxComponents {
		metrics, health := ports[2+2*i], ports[3+2*i]
		args := append([]string{
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(metrics),
			"--health-addr=127.0.0.1:" + strconv.Itoa(health),
			"--enable-leader-election=false",
			"--watch-all-namespaces=true",
		}, c.args(state.ArtifactAddr, storage)...)
		if concurrent > 0 {
			args = append(args, "--concurrent="+strconv.Itoa(concurrent))
		}
		p, err := f.startFluxProcess(c.name, c.binary(f.Toolchain.Flux), args, env, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return err
		}
		if err := f.update(func() { state.Processes = append(state.Processes, p) }); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(state.Processes))
	for i, p := range state.Processes {
		wg.Go(func() { errs[i] = waitReady(ctx, p.Name, p.PID, p.ReadyURL, p.Log, dir) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flux: %w", err)
	}
	f.logf("flux %s: controllers up in %s, artifacts at http://%s, OCI registry at %s (logs in %s)",
		FluxVersion, time.Since(t0).Round(100*time.Millisecond), state.ArtifactAddr, state.Registry, filepath.Join(dir, "logs"))
	return nil
}

// startFluxProcess starts one process detached from the caller's process group, with its working
// directory in the fleet's flux directory (how Down recognises it) and its output in
// logs/<name>.log.
func (f *Fleet) startFluxProcess(name, binary string, args, env []string, readyURL string) (FluxProc, error) {
	dir := filepath.Join(f.Dir, fluxDir)
	p := FluxProc{Name: name, ReadyURL: readyURL, Log: filepath.Join(dir, "logs", name+".log")}
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return p, err
	}
	defer logFile.Close() // the child holds its own descriptor
	// A temporary directory of the process's own, as a pod has: kustomize-controller removes
	// every kustomization-* directory it finds in its TMPDIR when it starts ("stale", left by
	// an earlier process of its pod), which with a shared /tmp included the builds in progress
	// of another bed's controller (CI's TestAccRollout_fluxPlantedTag failed on one).
	tmp := filepath.Join(dir, "tmp", name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return p, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), ociRegistryEnv, "KUBECONFIG", "RUNTIME_NAMESPACE", "TMPDIR"), append(env, "TMPDIR="+tmp)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return p, fmt.Errorf("flux: start %s: %w", name, err)
	}
	p.PID = cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it if it dies while this process lives
	return p, nil
}

// withoutEnv drops the named variables from env.
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// waitReady polls url until it answers 200. A process that exits (or whose working directory is
// not under ownerDir) fails at once, with the end of its log.
func waitReady(ctx context.Context, name string, pid int, url, log, ownerDir string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if !ownedAlive(pid, ownerDir) {
			raw, _ := os.ReadFile(log)
			return fmt.Errorf("%s exited during start; end of %s:\n%s", name, log, tail(string(raw), 15))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			raw, _ := os.ReadFile(log)
			return fmt.Errorf("%s not ready at %s: %w; end of %s:\n%s", name, url, ctx.Err(), log, tail(string(raw), 15))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopFlux stops the processes of the Flux option (SIGTERM, then SIGKILL after 10 s): only live
// processes whose working directory is the fleet's flux directory.
func (f *Fleet) stopFlux() error {
	f.mu.Lock()
	state := f.Flux
	f.mu.Unlock()
	if state == nil {
		return nil
	}
	pids := make([]int, 0, len(state.Processes))
	for _, p := range state.Processes {
		pids = append(pids, p.PID)
	}
	if err := stopOwned(pids, state.Dir); err != nil {
		return fmt.Errorf("flux: %w", err)
	}
	return nil
}

// stopOwned sends SIGTERM to those of pids that run with their working directory in dir, waits
// up to 10 s for them to exit, then kills what is left.
func stopOwned(pids []int, dir string) error {
	pids = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !ownedAlive(pid, dir) })
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := clock.System{}.Now().Add(10 * time.Second)
	for {
		pids = slices.DeleteFunc(pids, func(pid int) bool { return !ownedAlive(pid, dir) })
		if len(pids) == 0 {
			return nil
		}
		if (clock.System{}).Now().After(deadline) {
			killOwned(pids, dir)
			time.Sleep(200 * time.Millisecond)
			if pids = slices.DeleteFunc(pids, func(pid int) bool { return !ownedAlive(pid, dir) }); len(pids) > 0 {
				return fmt.Errorf("processes %v survive SIGKILL", pids)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FluxObject is an unstructured Flux object of the given apiVersion and kind (the test bed reads
// and writes Flux objects unstructured, so the main module does not take Flux's API modules).
func FluxObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
