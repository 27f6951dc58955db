package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

const (
	// DefaultClusterAPINamespace is where the real Cluster API controllers watch (Options.ClusterAPI).
	DefaultClusterAPINamespace = "capi"
	// capiTestModule holds CAPD and CAPI's test extension; it is released with the root module.
	capiTestModule = "sigs.k8s.io/cluster-api/test"
	// capiStartTimeout bounds the start of all managers (warm: a few seconds each).
	capiStartTimeout = 2 * time.Minute
	// clusterAPIDir is the fleet's sub-directory for the managers: certs, logs, their cwd.
	clusterAPIDir = "capi"
	// ClusterAPIWatchFilter is the value of the cluster.x-k8s.io/watch-filter label
	// (clusterv1.WatchLabel) the managers are started with (--watch-filter): they reconcile only
	// objects that carry it. See ClusterAPI.
	ClusterAPIWatchFilter = "gradual-testbed"
)

// contractLabels mark a provider's CRDs with the CAPI contract versions it implements; CAPI finds
// the version of a referenced kind (KubeadmControlPlane, DevCluster, ...) through them and fails
// to reconcile without. The modules add them with kustomize (config/crd/kustomization.yaml), which
// the test bed does not run, so it adds them itself. Core's own CRDs need none.
var contractLabels = map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"}

// ClusterAPI is the state of the real Cluster API controllers of a fleet started with
// Options.ClusterAPI: local processes against the management kube-apiserver.
//
// They are scoped twice, so the Clusters whose status the test bed writes (Fleet.Namespace) are
// left alone: the managers run with --watch-filter and reconcile only objects labelled
// cluster.x-k8s.io/watch-filter=gradual-testbed (put it on the Cluster, its infrastructure and
// control plane objects, the MachineDeployment and its template's metadata, the KCP's
// machineTemplate metadata, and ExtensionConfigs: CAPI copies it from the templates to
// MachineSets, Machines and their bootstrap/infrastructure objects); and their admission webhooks
// apply in Namespace only. --namespace cannot be used: in v1.14.2 it makes controller-runtime
// hand out multi-namespace informers, which CAPI's consistency check (util/controller,
// used by the MachineDeployment, MachineSet and KubeadmControlPlane controllers) refuses with
// "failed to cast MachineSet informer to SharedIndexInformer", so nothing ever rolls out.
type ClusterAPI struct {
	Namespace string `json:"namespace"`
	// WatchFilter is the cluster.x-k8s.io/watch-filter label value the managers reconcile.
	WatchFilter string `json:"watchFilter"`
	// Dir holds the serving certificate (certs/), the logs (logs/<name>.log) and is the
	// processes' working directory, which is how Down recognises them.
	Dir string `json:"dir"`
	// CABundle is the PEM CA that signed the managers' and the test extension's serving
	// certificate (the CA key is discarded once the certificate is signed).
	CABundle  []byte           `json:"caBundle"`
	Processes []ClusterAPIProc `json:"processes"`
	// TestExtensionURL is where CAPI's test extension serves its runtime hooks.
	TestExtensionURL string `json:"testExtensionURL"`
	// ServiceProxy is the managers' HTTPS_PROXY (http://127.0.0.1:<port>): it stands in for
	// cluster DNS, reaching <name>.<namespace>.svc:<port> at a ready endpoint of that Service
	// (see svcproxy.go). Empty on fleets started before it existed.
	ServiceProxy string `json:"serviceProxy,omitempty"`
	// InPlaceUpdatesOff: the core and KubeadmControlPlane managers run with Cluster API's
	// InPlaceUpdates feature gate off (Options.InPlaceUpdatesOff), so CAPI replaces machines.
	InPlaceUpdatesOff bool `json:"inPlaceUpdatesOff,omitempty"`
}

// ClusterAPIProc is one manager process.
type ClusterAPIProc struct {
	Name        string `json:"name"`
	PID         int    `json:"pid"`
	WebhookPort int    `json:"webhookPort"`
	HealthPort  int    `json:"healthPort"`
	// DiagnosticsPort serves /metrics over plain HTTP on 127.0.0.1 (--insecure-diagnostics).
	DiagnosticsPort int    `json:"diagnosticsPort"`
	Log             string `json:"log"`
}

// capiComponent is how one manager is started and which webhooks it serves.
type capiComponent struct {
	name   string
	binary func(ClusterAPIBinaries) string
	// module and webhookManifest locate its config/webhook/manifests.yaml; empty: none.
	module, webhookManifest string
	// crdDir holds CRDs the fleet does not install already; they get contractLabels.
	crdDir string
	// labelCRDs: CRDs installed by installCRDs that need contractLabels added.
	labelCRDs []string
	// featureGates; scoped says whether it is a CAPI manager that takes --watch-filter (and the
	// CRD migration flags).
	featureGates string
	scoped       bool
	env          []string
	// deployment is how clusterctl installs the manager (namespace/name, cluster.x-k8s.io/provider
	// label, image); the test bed records the process as such a Deployment (managerDeployment).
	// Empty: not recorded.
	deployment managerRecord
}

// managerRecord names a manager's Deployment as clusterctl installs it.
type managerRecord struct {
	namespace, name, provider, image string
}

// capiComponents are started together. Feature gates: InPlaceUpdates (alpha, off by default in
// v1.14; Options.InPlaceUpdatesOff turns it off) in the core manager (MachineDeployment/
// MachineSet/Machine in-place flow) and in KCP;
// RuntimeSDK in the core manager for ExtensionConfig discovery and the runtime client (KCP builds
// its own read-only registry when InPlaceUpdates is on); ClusterTopology (alpha, off by default)
// in the core manager (topology and ClusterClass controllers and webhooks), KCP and CAPD (their
// template webhooks refuse templates without it), for clusters built from a ClusterClass.
var capiComponents = []capiComponent{
	{
		name: "capi-core", binary: func(b ClusterAPIBinaries) string { return b.Core },
		module: "sigs.k8s.io/cluster-api", webhookManifest: "core/config/webhook/manifests.yaml",
		featureGates: "InPlaceUpdates=true,RuntimeSDK=true,ClusterTopology=true", scoped: true,
		deployment: managerRecord{"capi-system", "capi-controller-manager", "cluster-api", "registry.k8s.io/cluster-api/cluster-api-controller"},
	},
	{
		name: "capi-kubeadm-bootstrap", binary: func(b ClusterAPIBinaries) string { return b.KubeadmBootstrap },
		module: "sigs.k8s.io/cluster-api", webhookManifest: "bootstrap/kubeadm/config/webhook/manifests.yaml",
		labelCRDs: []string{"kubeadmconfigs.bootstrap.cluster.x-k8s.io", "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io"},
		scoped:    true,
		deployment: managerRecord{"capi-kubeadm-bootstrap-system", "capi-kubeadm-bootstrap-controller-manager", "bootstrap-kubeadm",
			"registry.k8s.io/cluster-api/kubeadm-bootstrap-controller"},
	},
	{
		name: "capi-kubeadm-control-plane", binary: func(b ClusterAPIBinaries) string { return b.KubeadmControlPlane },
		module: "sigs.k8s.io/cluster-api", webhookManifest: "controlplane/kubeadm/config/webhook/manifests.yaml",
		labelCRDs:    []string{"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io"},
		featureGates: "InPlaceUpdates=true,RuntimeSDK=true,ClusterTopology=true", scoped: true,
		deployment: managerRecord{"capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-controller-manager", "control-plane-kubeadm",
			"registry.k8s.io/cluster-api/kubeadm-control-plane-controller"},
	},
	{
		// CAPD with its in-memory backend (DevCluster/DevMachine backend.inMemory): fake workload
		// API servers and etcd served by the process itself on POD_IP, ports 20000-30000, plus a
		// debug server on the fixed port 19000 (so two CAPDs cannot run on one machine at once).
		// No Docker: the Docker client it builds at start is never used by in-memory objects.
		name: "capd", binary: func(b ClusterAPIBinaries) string { return b.CAPD },
		module: capiTestModule, webhookManifest: "infrastructure/docker/config/webhook/manifests.yaml",
		crdDir: "infrastructure/docker/config/crd/bases", scoped: true,
		featureGates: "ClusterTopology=true",
		env:          []string{"POD_IP=127.0.0.1"},
	},
	{
		// CAPI's test extension: a runtime extension server (in-place update, lifecycle, topology
		// mutation and upgrade plan hooks); registered through an ExtensionConfig, not webhooks.
		name: "capi-test-extension", binary: func(b ClusterAPIBinaries) string { return b.TestExtension },
	},
}

// missingClusterAPI names the unset ClusterAPIBinaries fields, if any.
func missingClusterAPI(b ClusterAPIBinaries) []string {
	var missing []string
	for _, c := range capiComponents {
		if p := c.binary(b); p == "" || checkExecutable(p) != nil {
			missing = append(missing, c.name)
		}
	}
	return missing
}

// HasClusterAPI reports whether the toolchain holds every Cluster API binary.
func (tc Toolchain) HasClusterAPI() bool { return len(missingClusterAPI(tc.ClusterAPI)) == 0 }

// checkClusterAPIOptions fails before anything starts when the binaries are missing or the
// namespace is unusable; it fills in the default namespace.
func checkClusterAPIOptions(tc Toolchain, opts *Options) error {
	if missing := missingClusterAPI(tc.ClusterAPI); len(missing) > 0 {
		return fmt.Errorf("cluster API binaries missing (%s): run `tools/toolchain.sh cluster-api` (cold: ~15 min on 2 cores)", strings.Join(missing, ", "))
	}
	if opts.ClusterAPINamespace == "" {
		opts.ClusterAPINamespace = DefaultClusterAPINamespace
	}
	if errs := validation.IsDNS1123Label(opts.ClusterAPINamespace); len(errs) > 0 {
		return fmt.Errorf("cluster API namespace %q: %v", opts.ClusterAPINamespace, errs)
	}
	if opts.ClusterAPINamespace == opts.Namespace {
		return fmt.Errorf("cluster API namespace %q is the fleet's namespace: the controllers would take over the Clusters whose status the test bed writes", opts.ClusterAPINamespace)
	}
	return nil
}

// startClusterAPI installs what the real controllers need in the management cluster and starts
// them: their CRDs (with contract labels), a serving certificate for 127.0.0.1, the managers, then
// their webhook configurations pointing at https://127.0.0.1:<port>, scoped to the namespace.
func (f *Fleet) startClusterAPI(ctx context.Context, namespace string, inPlaceOff bool) (err error) {
	opts := Options{Namespace: f.Namespace, ClusterAPINamespace: namespace}
	if err := checkClusterAPIOptions(f.Toolchain, &opts); err != nil {
		return err
	}
	namespace = opts.ClusterAPINamespace
	ctx, cancel := context.WithTimeout(ctx, capiStartTimeout)
	defer cancel()
	t0 := clock.System{}.Now()
	dir := filepath.Join(f.Dir, clusterAPIDir)
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	// The test extension also answers as the Service RegisterTestExtensionService installs it
	// behind: Cluster API verifies <name>.<namespace>.svc.
	certs, err := servingcert.New("gradual-testbed cluster API", TestExtensionService+"."+namespace+".svc")
	if err == nil {
		err = certs.WriteFiles(certDir)
	}
	if err != nil {
		return fmt.Errorf("cluster API: serving certificate: %w", err)
	}
	caPEM := certs.CAPEM
	state := &ClusterAPI{Namespace: namespace, WatchFilter: ClusterAPIWatchFilter, Dir: dir, CABundle: caPEM, InPlaceUpdatesOff: inPlaceOff}
	if err := f.update(func() { f.ClusterAPI = state }); err != nil {
		return err
	}

	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	if err := installClusterAPICRDs(ctx, mc); err != nil {
		return fmt.Errorf("cluster API: %w", err)
	}
	if err := applyNamespace(ctx, mc, namespace); err != nil {
		return fmt.Errorf("cluster API: namespace %s: %w", namespace, err)
	}
	f.logf("cluster API: CRDs and namespace %s ready after %s", namespace, time.Since(t0).Round(100*time.Millisecond))

	ports, err := freePorts(3*len(capiComponents) + 1)
	if err != nil {
		return err
	}
	proxyPort := ports[len(ports)-1]
	state.ServiceProxy = fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	// Every outbound call of the managers but those to Services is on loopback, which Go never
	// proxies; NO_PROXY says so too (svcproxy.go).
	proxyEnv := []string{"HTTPS_PROXY=" + state.ServiceProxy, "NO_PROXY=127.0.0.1,localhost,::1", "HTTP_PROXY=", "http_proxy=", "https_proxy=", "no_proxy="}
	var records []*unstructured.Unstructured
	for i, c := range capiComponents {
		c = c.inPlaceUpdatesOff(inPlaceOff)
		p, args, err := f.startCAPIProcess(c, certDir, ports[3*i], ports[3*i+1], ports[3*i+2], proxyEnv)
		if err != nil {
			return err
		}
		if c.deployment.name != "" {
			records = append(records, managerDeployment(c.deployment, p, args))
		}
		if err := f.update(func() {
			state.Processes = append(state.Processes, p)
			if c.name == "capi-test-extension" {
				state.TestExtensionURL = fmt.Sprintf("https://127.0.0.1:%d", p.WebhookPort)
			}
		}); err != nil {
			return err
		}
	}
	// After the managers, so that state.Processes[i] stays capiComponents[i]'s.
	sp, err := f.startSvcProxy(proxyPort)
	if err != nil {
		return err
	}
	if err := f.update(func() { state.Processes = append(state.Processes, sp) }); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(state.Processes))
	for i, p := range state.Processes {
		wg.Go(func() { errs[i] = waitHealthy(ctx, p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster API: %w", err)
	}
	f.logf("cluster API: %d processes (managers, service proxy) ready after %s", len(state.Processes), time.Since(t0).Round(100*time.Millisecond))
	for _, d := range records {
		if err := applyNamespace(ctx, mc, d.GetNamespace()); err != nil {
			return fmt.Errorf("cluster API: namespace %s: %w", d.GetNamespace(), err)
		}
		if err := apply(ctx, mc, d); err != nil {
			return fmt.Errorf("cluster API: record %s as Deployment %s/%s: %w", d.GetLabels()[providerLabel], d.GetNamespace(), d.GetName(), err)
		}
	}

	for i, c := range capiComponents {
		if c.webhookManifest == "" {
			continue
		}
		objs, err := webhookConfigurations(ctx, c, state.Processes[i].WebhookPort, caPEM, namespace)
		if err != nil {
			return fmt.Errorf("cluster API: %s webhooks: %w", c.name, err)
		}
		for _, o := range objs {
			if err := apply(ctx, mc, o); err != nil {
				return fmt.Errorf("cluster API: apply %s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
	}
	f.logf("cluster API %s: controllers up in %s, reconciling objects labelled %s=%s, webhooks for namespace %s (logs in %s)",
		CAPIVersion, time.Since(t0).Round(100*time.Millisecond), clusterv1.WatchLabel, ClusterAPIWatchFilter, namespace, filepath.Join(dir, "logs"))
	return nil
}

// installClusterAPICRDs adds what installCRDs does not: CAPD's infrastructure CRDs, and the
// contract labels on those and on the kubeadm bootstrap and control plane CRDs.
func installClusterAPICRDs(ctx context.Context, c client.Client) error {
	var objs []*unstructured.Unstructured
	for _, comp := range capiComponents {
		if comp.crdDir != "" {
			root, err := moduleDir(ctx, comp.module)
			if err != nil {
				return err
			}
			docs, err := readCRDDir(filepath.Join(root, comp.crdDir))
			if err != nil {
				return err
			}
			objs = append(objs, docs...)
		}
		for _, name := range comp.labelCRDs {
			// Only the labels: a server-side apply by the same field manager that owns the rest
			// would drop the rest, so this goes under a field manager of its own.
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("apiextensions.k8s.io/v1")
			u.SetKind("CustomResourceDefinition")
			u.SetName(name)
			u.SetLabels(contractLabels)
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner+"-contract"), client.ForceOwnership); err != nil {
				return fmt.Errorf("label CRD %s: %w", name, err)
			}
		}
	}
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range contractLabels {
			labels[k] = v
		}
		o.SetLabels(labels)
	}
	return installCRDObjects(ctx, c, objs)
}

// startCAPIProcess starts one manager, detached from the caller's process group (so Ctrl-C on
// `gradual-testbed up` does not take it down), with its working directory in the fleet's
// directory (how Down recognises it) and its output in logs/<name>.log. It returns the process
// and the arguments it was started with.
func (f *Fleet) startCAPIProcess(c capiComponent, certDir string, webhookPort, healthPort, diagPort int, env []string) (ClusterAPIProc, []string, error) {
	dir := filepath.Join(f.Dir, clusterAPIDir)
	p := ClusterAPIProc{
		Name: c.name, WebhookPort: webhookPort, HealthPort: healthPort, DiagnosticsPort: diagPort,
		Log: filepath.Join(dir, "logs", c.name+".log"),
	}
	args := c.args(certDir, webhookPort, healthPort, diagPort)
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return p, nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(c.binary(f.Toolchain.ClusterAPI), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Management.KubeconfigPath)
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return p, nil, fmt.Errorf("cluster API: start %s: %w", c.name, err)
	}
	p.PID = cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it if it dies while this process lives
	return p, args, nil
}

// startSvcProxy starts the Service proxy (svcproxy.go): this executable again with svcProxyEnv,
// detached and in the fleet's directory like the managers, its /readyz on the same port.
func (f *Fleet) startSvcProxy(port int) (ClusterAPIProc, error) {
	dir := filepath.Join(f.Dir, clusterAPIDir)
	p := ClusterAPIProc{Name: "svc-proxy", HealthPort: port, Log: filepath.Join(dir, "logs", "svc-proxy.log")}
	self, err := os.Executable()
	if err != nil {
		return p, fmt.Errorf("cluster API: service proxy: %w", err)
	}
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return p, err
	}
	defer logFile.Close()
	cmd := exec.Command(self)
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), ociRegistryEnv, svcProxyEnv, "KUBECONFIG"),
		"KUBECONFIG="+f.Management.KubeconfigPath, svcProxyEnv+"="+fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return p, fmt.Errorf("cluster API: start the service proxy: %w", err)
	}
	p.PID = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	return p, nil
}

// args are the manager's command-line arguments.
func (c capiComponent) args(certDir string, webhookPort, healthPort, diagPort int) []string {
	args := []string{
		"--webhook-port=" + strconv.Itoa(webhookPort),
		"--webhook-cert-dir=" + certDir,
		"--health-addr=127.0.0.1:" + strconv.Itoa(healthPort),
		"--diagnostics-address=127.0.0.1:" + strconv.Itoa(diagPort),
		"--insecure-diagnostics",
		"--leader-elect=false",
	}
	if c.scoped {
		// The CRDs are fresh, so there is nothing to migrate; the migrator would otherwise touch
		// every object of its kinds in every namespace, the fleet's own Clusters included.
		args = append(args, "--watch-filter="+ClusterAPIWatchFilter, "--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields")
	}
	if c.featureGates != "" {
		args = append(args, "--feature-gates="+c.featureGates)
	}
	return args
}

// inPlaceUpdatesOff is c with the InPlaceUpdates feature gate off when off is true.
func (c capiComponent) inPlaceUpdatesOff(off bool) capiComponent {
	if off {
		c.featureGates = strings.ReplaceAll(c.featureGates, "InPlaceUpdates=true", "InPlaceUpdates=false")
	}
	return c
}

// providerLabel is clusterctl's label naming the provider of each component it installs
// (clusterv1.ProviderNameLabel).
const providerLabel = "cluster.x-k8s.io/provider"

// managerDeployment records a manager process the way clusterctl would have installed it: a
// Deployment with clusterctl's name, namespace and provider label whose container runs the
// manager with the flags the process was started with, and the release image of CAPIVersion.
// It has no replicas (the process runs outside the cluster; the annotation says which one), so
// nothing is scheduled: it is there for what reads how Cluster API runs (the in-place planner
// reads the --feature-gates flag from it).
func managerDeployment(r managerRecord, p ClusterAPIProc, args []string) *unstructured.Unstructured {
	labels := map[string]any{providerLabel: r.provider, "clusterctl.cluster.x-k8s.io": "", "control-plane": "controller-manager"}
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]any{
			"name": r.name, "namespace": r.namespace, "labels": labels,
			"annotations": map[string]any{"gradual.dev/testbed-process": fmt.Sprintf("%s (pid %d, log %s)", p.Name, p.PID, p.Log)},
		},
		"spec": map[string]any{
			"replicas": int64(0),
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "manager", "image": r.image + ":" + CAPIVersion,
					"command": []any{"/manager"}, "args": stringsToAny(args),
				}}},
			},
		},
	}}
	return d
}

func stringsToAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// waitHealthy waits for a manager's /readyz (which includes its webhook server having started).
// A manager that exits fails at once, with the end of its log.
func waitHealthy(ctx context.Context, p ClusterAPIProc) error {
	return waitReady(ctx, p.Name, p.PID, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.HealthPort), p.Log, filepath.Dir(filepath.Dir(p.Log)))
}

// webhookConfigurations reads a module's generated webhook configurations and points them at a
// manager on 127.0.0.1: each service reference becomes url https://127.0.0.1:<port><path> with
// the test bed's CA, each configuration gets a name of its own (every module calls its own
// "mutating-webhook-configuration"), and each webhook a namespace selector for the controllers'
// namespace, so objects elsewhere (the fleet's Clusters, written by the test bed with a status
// no webhook would accept as is) are not sent to them. Cluster-scoped kinds (ExtensionConfig)
// ignore namespace selectors and are always checked.
func webhookConfigurations(ctx context.Context, c capiComponent, port int, caPEM []byte, namespace string) ([]*unstructured.Unstructured, error) {
	root, err := moduleDir(ctx, c.module)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, c.webhookManifest))
	if err != nil {
		return nil, err
	}
	docs, err := decodeYAML(raw)
	if err != nil {
		return nil, err
	}
	return rewriteWebhooks(docs, c.name, port, caPEM, namespace)
}

// rewriteWebhooks is the pure part of webhookConfigurations.
func rewriteWebhooks(docs []*unstructured.Unstructured, component string, port int, caPEM []byte, namespace string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range docs {
		kind := o.GetKind()
		if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
			continue
		}
		o.SetName("gradual-testbed-" + component + "-" + strings.ToLower(strings.TrimSuffix(kind, "WebhookConfiguration")))
		hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		for i, h := range hooks {
			hook, ok := h.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: webhook %d is not an object", kind, i)
			}
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			if path == "" {
				return nil, fmt.Errorf("%s: webhook %v has no service path", kind, hook["name"])
			}
			hook["clientConfig"] = map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
				"caBundle": encodeBase64(caPEM),
			}
			hook["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
				"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{namespace},
			}}}
			hooks[i] = hook
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, errors.New("no webhook configurations found")
	}
	return out, nil
}

// stopClusterAPI stops the managers this fleet started (SIGTERM, then SIGKILL after 10 s): only
// live processes whose working directory is the fleet's, never a reused pid of someone else.
func (f *Fleet) stopClusterAPI() error {
	f.mu.Lock()
	state := f.ClusterAPI
	f.mu.Unlock()
	if state == nil {
		return nil
	}
	pids := make([]int, 0, len(state.Processes))
	for _, p := range state.Processes {
		pids = append(pids, p.PID)
	}
	if err := stopOwned(pids, state.Dir); err != nil {
		return fmt.Errorf("cluster API: %w", err)
	}
	return nil
}

// RegisterTestExtension registers CAPI's test extension (started with Options.ClusterAPI) in an
// ExtensionConfig of that name: served on 127.0.0.1 with the test bed's CA, for Clusters in the
// controllers' namespace only. The core manager then calls its discovery endpoint and lists the
// handlers (can-update-machine.<name>, can-update-machineset.<name>, update-machine.<name>, ...)
// in the ExtensionConfig's status.
func (f *Fleet) RegisterTestExtension(ctx context.Context, name string) error {
	f.mu.Lock()
	state := f.ClusterAPI
	f.mu.Unlock()
	if state == nil || state.TestExtensionURL == "" {
		return fmt.Errorf("fleet %s runs no Cluster API controllers (Options.ClusterAPI)", f.Name)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	return apply(ctx, mc, testExtensionConfig(name, state))
}

func testExtensionConfig(name string, state *ClusterAPI) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "runtime.cluster.x-k8s.io/v1beta2",
		"kind":       "ExtensionConfig",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{clusterv1.WatchLabel: state.WatchFilter}},
		"spec": map[string]any{
			"clientConfig": map[string]any{"url": state.TestExtensionURL, "caBundle": encodeBase64(state.CABundle)},
			// The test extension's lifecycle hooks (called for clusters built from a ClusterClass)
			// keep their answers in a ConfigMap named after the ExtensionConfig, and fail without it.
			"settings": map[string]any{"extensionConfigName": name},
			"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{
				"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{state.Namespace},
			}}},
		},
	}}
}
