// Package testbed runs a real local fleet for tests and the demo: a management cluster holding
// Cluster API objects and kwok workload clusters, all real kube-apiservers started by
// `kwokctl --runtime binary` from the pinned toolchain (`make tools`).
//
// The management cluster serves the CAPI CRDs of sigs.k8s.io/cluster-api (core, kubeadm
// bootstrap, kubeadm control plane, read from the Go module cache) and the test bed's own
// infrastructure kinds (infrastructure.gradual.dev). For each workload it holds a v1beta2
// Cluster whose status the test bed writes as CAPI's controllers would (no controllers run), a
// GradualCluster, and a <name>-kubeconfig Secret with the workload's admin kubeconfig. Workload
// clusters get kwok fake Nodes, so Deployments really schedule and their pods go Running. Each
// cluster's controller manager and scheduler run without leader election, so that a cluster a
// fault test froze (SIGSTOP, SIGCONT) keeps them: with it they exit on finding their lease
// expired, and the cluster's Deployments and Namespace deletions stall from then on.
//
// A fleet lives in one directory (Options.Dir): fleet.json (its state, see Load), the
// kubeconfigs, kwokctl's logs and its own KWOK_WORKDIR, so it never sees or deletes clusters it
// did not create. Down stops exactly those. In Go tests use Start (torn down by t.Cleanup; fleets
// of killed test processes are reaped by the next Start); elsewhere Up and Down, or the
// gradual-testbed command.
//
// # Real Cluster API controllers (opt-in)
//
// Options.ClusterAPI (`gradual-testbed up --cluster-api`) also runs Cluster API v1.14.2 itself,
// as local processes against the management kube-apiserver: the core manager, the kubeadm
// bootstrap and control plane managers, CAPD (whose in-memory backend, DevCluster/DevMachine
// `backend.inMemory`, serves fake workload API servers and etcd from its own process: no Docker)
// and CAPI's test extension. `tools/toolchain.sh cluster-api` builds them (cold ~7 min on 2
// cores, of which ~5 for the first; cached after); they start in ~3 s. What it takes, as learnt:
//
//   - CRDs: core, kubeadm bootstrap and control plane (config/crd/bases, as for every fleet) plus
//     CAPD's twelve (test module, infrastructure/docker/config/crd/bases). Provider CRDs need the
//     contract labels cluster.x-k8s.io/v1beta1 and /v1beta2 that kustomize adds upstream, or CAPI
//     cannot resolve the kinds a Cluster refers to. No conversion webhooks are configured: every
//     object is v1beta2 and the CRD migrator is skipped (--skip-crd-migration-phases).
//   - Webhooks: each module's config/webhook/manifests.yaml, rewritten to
//     url https://127.0.0.1:<--webhook-port><path> with the test bed's CA, renamed per manager
//     (they all call theirs "mutating-webhook-configuration"), and limited by namespaceSelector to
//     ClusterAPI.Namespace ("capi"), so the fleet's own Clusters never reach them. One generated
//     CA and serving certificate (127.0.0.1, localhost) in --webhook-cert-dir serve all managers
//     and the test extension; the CA key is never written.
//   - Flags: --webhook-port, --webhook-cert-dir, --health-addr=127.0.0.1:P (readiness is
//     /readyz), --diagnostics-address=127.0.0.1:P --insecure-diagnostics, --leader-elect=false,
//     --watch-filter=gradual-testbed, --feature-gates=InPlaceUpdates=true,RuntimeSDK=true,
//     ClusterTopology=true (core, KCP; Options.InPlaceUpdatesOff, `up --in-place-updates-off`,
//     starts them with InPlaceUpdates=false, v1.14's default), ClusterTopology=true (CAPD: its
//     DevClusterTemplate webhook wants it), so clusters can be built from a ClusterClass
//     (InMemoryClusterClass, InMemoryCluster.Class); ports are picked free per start. CAPD needs
//     POD_IP=127.0.0.1 (where its in-memory API servers listen, ports 20000-30000) and always
//     binds a debug server on :19000, so only one such fleet can run on a machine at a time
//     (take /tmp/gradual-fleet.lock).
//   - Manager records: the core, kubeadm bootstrap and control plane managers are recorded as the
//     Deployments clusterctl would install (capi-system/capi-controller-manager, ...; label
//     cluster.x-k8s.io/provider; the release image; the process's own arguments), with no
//     replicas and an annotation naming the process. They run nothing; the in-place planner reads
//     Cluster API's InPlaceUpdates feature gate from their --feature-gates flag, as it does in a
//     real management cluster (nothing on Machines or owners shows the gate).
//   - Scoping is by label, not namespace: --namespace breaks v1.14.2's MachineDeployment,
//     MachineSet and KCP controllers ("failed to cast MachineSet informer to
//     SharedIndexInformer": a namespaced cache hands out multi-namespace informers that CAPI's
//     consistency check refuses). Objects CAPI should reconcile carry
//     cluster.x-k8s.io/watch-filter=gradual-testbed, on the templates' metadata too (see
//     ClusterAPI); the fleet's kwok-backed Clusters carry none and are left alone.
//   - CAPD v1.14.2 panics on a DevCluster without any annotation (nil map write); give it one.
//     Its DevMachineTemplate controller logs Docker errors on every reconcile; harmless here.
//   - In-place updates: register the test extension with Fleet.RegisterTestExtension (an
//     ExtensionConfig with url and caBundle; the core manager lists its handlers, e.g.
//     can-update-machineset.<name>, in status.handlers). A MachineDeployment version change it
//     covers is done in place only when the rollout may take a Machine down: with the default
//     maxSurge 1 / maxUnavailable 0 and one replica, CAPI surges a new Machine first and the old
//     one is deleted, not moved (CanUpdateMachineSet was asked and said yes). With maxSurge 0 /
//     maxUnavailable 1 the Machine keeps its name, moves to the new MachineSet, shows
//     Updating=True while UpdateMachine runs (~15-20 s for the test extension) and is UpToDate
//     only once its Node's kubelet reports the new version, which the test extension never
//     changes (TestClusterAPIControllers plays the kubelet).
//   - Extensions registered by Service: the managers run as local processes, where
//     <name>.<namespace>.svc (what Cluster API's runtime client calls for an ExtensionConfig's
//     clientConfig.service) does not resolve. Their transport honours HTTPS_PROXY
//     (utilnet.SetTransportDefaults, http.ProxyFromEnvironment), so they are started with
//     HTTPS_PROXY pointing at a CONNECT proxy of the test bed (svcproxy.go; this executable
//     started again, process "svc-proxy", ClusterAPI.ServiceProxy) that reaches only such
//     names, at a ready endpoint of the Service read from the management API server; all else
//     they call is on loopback, which Go never proxies. Fleet.RegisterTestExtensionService puts
//     the test extension behind Service capi/capi-test-extension (its certificate names
//     capi-test-extension.capi.svc; the endpoint is its port on the machine's global IPv4
//     address, with a Pod of that IP, because kube-apiserver's service proxy, which the
//     preview goes through, refuses loopback and requires a Pod behind the address).
//   - gradual_inplace_update against these controllers (internal/resources/inplaceupdate,
//     TestAccCAPIInPlace_*, which play the kubelet the same way): a warm fleet with one
//     in-memory cluster Running and the test extension registered takes ~55 s; CAPI updates a
//     covered version bump of the one-replica MachineDeployment in place in ~25 s, replaces a
//     Machine for an uncovered DevMachine change in ~20 s. CAPI's MachineDeployment status can
//     lag a step behind (replicas all "up to date" while the old Machine is being deleted), so
//     verification counts the Machines itself.
//
// # Flux controllers (opt-in)
//
// Options.Flux (`gradual-testbed up --flux`) runs Flux's source-controller and
// kustomize-controller (FluxVersion: v1.9.6 of both, the newest whose go.mod takes Go 1.26;
// v1.10 wants go 1.27) as local processes against the management kube-apiserver, for the Flux
// delivery engine: an OCI artifact per revision, a Kustomization per cluster applying remotely
// through the cluster's <name>-kubeconfig Secret (spec.kubeConfig.secretRef, key value; the
// kubeconfigs point at 127.0.0.1, which the local kustomize-controller reaches as an in-cluster
// one reaches a real workload). `tools/toolchain.sh flux` builds both from the Go module proxy
// in a helper module (pkg/artifact is pinned down to v0.18.0, the newest v0.18 served here) and
// copies their CRDs from the modules' config/crd/bases (GRADUAL_FLUX_* in toolchain.env).
//
//   - CRDs: all of both modules' (source-controller's reconcilers watch every source kind, so
//     GitRepository, HelmRepository, HelmChart, Bucket and ExternalArtifact are installed too);
//     namespace Options.FluxNamespace (default flux-system) is the controllers' RUNTIME_NAMESPACE.
//   - Flags: --metrics-addr and --health-addr on free loopback ports (readiness /readyz),
//     --enable-leader-election=false, --watch-all-namespaces; source-controller also
//     --storage-path (DIR/flux/storage) and --storage-addr = --storage-adv-addr = 127.0.0.1:P: its
//     artifact server, started at once without leader election, from which kustomize-controller
//     downloads (Fleet.Flux.ArtifactAddr).
//   - OCI registry: go-containerregistry's in-memory pkg/registry, plain HTTP on 127.0.0.1
//     (Fleet.Flux.Registry, RegistryURL); OCIRepositories need spec.insecure true. It is this very
//     executable (test binary or gradual-testbed) started again with GRADUAL_TESTBED_OCI_REGISTRY
//     set, which this package's init serves: no binary of its own. A restart empties it.
//   - Put OCIRepositories and Kustomizations in the fleet's namespace: a Kustomization's
//     kubeConfig.secretRef names a Secret of its own namespace, and the kubeconfig Secrets live
//     beside the Clusters. The test bed reads and writes Flux objects unstructured (FluxObject):
//     Flux's API modules v1.9.6 would move the main module's k8s.io modules from v0.36.3 to v0.36.4.
//   - Down stops the three processes (recognised by their working directory, DIR/flux) with the
//     fleet. TestFluxControllers (GRADUAL_TEST_FLUX=1) is the proof: publish, apply, move to a
//     second revision, prune on delete, with timings.
package testbed
