package testbed

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

const (
	// CAPIVersion is the sigs.k8s.io/cluster-api release whose CRDs the management cluster serves;
	// keep it in step with the sigs.k8s.io/cluster-api/api requirement in go.mod.
	CAPIVersion = "v1.14.2"
	// InfrastructureGroup is the API group of the test bed's own infrastructure provider kinds.
	InfrastructureGroup = "infrastructure.gradual.dev"
	// fieldOwner is the server-side apply field manager of everything the test bed writes.
	fieldOwner = "gradual-testbed"
	// controlPlaneGroup/Kind are what Cluster.spec.controlPlaneRef names (no such object exists:
	// no controllers run, the test bed writes the Cluster's status itself).
	controlPlaneGroup = "controlplane.cluster.x-k8s.io"
	controlPlaneKind  = "KubeadmControlPlane"
)

// capiCRDDirs are the CRD directories of the cluster-api module, relative to its root (v1.14
// moved the core ones under core/).
var capiCRDDirs = []string{
	"core/config/crd/bases",
	"bootstrap/kubeadm/config/crd/bases",
	"controlplane/kubeadm/config/crd/bases",
}

//go:embed crds/*.yaml
var ownCRDs embed.FS

// Scheme knows the kinds the test bed reads and writes: client-go's, CRDs, CAPI core v1beta2.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // static registrations; fails only if the types themselves are broken
		}
	}
	return s
}

// CAPIModuleDir locates sigs.k8s.io/cluster-api@CAPIVersion in the module cache, downloading it
// through the Go module proxy on first use: its CRDs serve tests as real, large bundles.
func CAPIModuleDir(ctx context.Context) (string, error) { return capiModuleDir(ctx) }

// capiModuleDir is CAPIModuleDir.
func capiModuleDir(ctx context.Context) (string, error) {
	return moduleDir(ctx, "sigs.k8s.io/cluster-api")
}

// moduleDir locates a module of the Cluster API release (the root module or its test module)
// at CAPIVersion in the module cache, downloading it on first use. It runs outside any module so
// it never touches a go.mod.
func moduleDir(ctx context.Context, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+CAPIVersion)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		err = errors.New(info.Error)
	}
	if err != nil || info.Dir == "" {
		return "", fmt.Errorf("locate the CAPI manifests (go mod download %s@%s): %v %s", module, CAPIVersion, err, strings.TrimSpace(stderr.String()))
	}
	return info.Dir, nil
}

// crdObjects reads every CRD the management cluster gets: CAPI's and the test bed's own.
func crdObjects(ctx context.Context) ([]*unstructured.Unstructured, error) {
	root, err := capiModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, d := range capiCRDDirs {
		docs, err := readCRDDir(filepath.Join(root, d))
		if err != nil {
			return nil, err
		}
		objs = append(objs, docs...)
	}
	own, err := ownCRDs.ReadFile("crds/infrastructure.gradual.dev.yaml")
	if err != nil {
		return nil, err
	}
	docs, err := decodeYAML(own)
	if err != nil {
		return nil, fmt.Errorf("embedded infrastructure CRDs: %w", err)
	}
	return append(objs, docs...), nil
}

// readCRDDir reads every YAML document of a module's config/crd/bases directory.
func readCRDDir(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s (cluster-api %s layout changed?)", dir, CAPIVersion)
	}
	var objs []*unstructured.Unstructured
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		docs, err := decodeYAML(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		objs = append(objs, docs...)
	}
	return objs, nil
}

func decodeYAML(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// installCRDs server-side applies the CRDs and waits until the API server serves them.
func installCRDs(ctx context.Context, c client.Client) error {
	objs, err := crdObjects(ctx)
	if err != nil {
		return err
	}
	return installCRDObjects(ctx, c, objs)
}

// installCRDObjects server-side applies CRDs and waits until the API server serves them.
func installCRDObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := apply(ctx, c, o); err != nil {
			return fmt.Errorf("apply CRD %s: %w", o.GetName(), err)
		}
	}
	for _, o := range objs {
		name := o.GetName()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

// apply server-side applies an object (or, for a "status" subresource, its status).
func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

func applyStatus(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// toUnstructured converts a typed object for server-side apply, dropping what apply must not send.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func applyNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	return apply(ctx, c, ns)
}

// clusterObject is the CAPI Cluster for a workload, as its spec says; status is separate.
func clusterObject(namespace string, w *Workload) *clusterv1.Cluster {
	spec := w.Spec
	cl := &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: namespace, Labels: copyMap(spec.Labels)},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: InfrastructureGroup, Kind: "GradualCluster", Name: spec.Name,
			},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlPlaneGroup, Kind: controlPlaneKind, Name: spec.Name + "-control-plane",
			},
		},
	}
	if spec.Paused {
		cl.Spec.Paused = ptr.To(true)
	}
	if spec.ClusterAPI {
		if cl.Labels == nil {
			cl.Labels = map[string]string{}
		}
		cl.Labels[clusterv1.WatchLabel] = ClusterAPIWatchFilter
	}
	if host, port, ok := hostPort(w.Server); ok {
		cl.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: port}
	}
	if spec.KubernetesVersion != "" {
		cl.Spec.Topology = clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: "gradual-testbed"},
			Version:  spec.KubernetesVersion,
		}
	}
	return cl
}

// clusterStatus is the status CAPI's controllers would write for a workload of that readiness.
func clusterStatus(spec WorkloadSpec, generation int64, now metav1.Time) clusterv1.ClusterStatus {
	cond := func(typ string, ok bool, yes, no, msgYes, msgNo string) metav1.Condition {
		c := metav1.Condition{Type: typ, ObservedGeneration: generation, LastTransitionTime: now}
		if ok {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, yes, msgYes
		} else {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, no, msgNo
		}
		return c
	}
	ready := spec.Ready
	st := clusterv1.ClusterStatus{
		ObservedGeneration: generation,
		Initialization: clusterv1.ClusterInitializationStatus{
			InfrastructureProvisioned: ptr.To(ready),
			ControlPlaneInitialized:   ptr.To(ready),
		},
		Conditions: []metav1.Condition{
			cond(clusterv1.AvailableCondition, ready, clusterv1.ClusterAvailableReason, clusterv1.ClusterNotAvailableReason,
				"Cluster is available", "* ControlPlaneAvailable: control plane is not available\n* InfrastructureReady: infrastructure is not ready"),
			cond(clusterv1.InfrastructureReadyCondition, ready, clusterv1.ClusterInfrastructureReadyReason, clusterv1.ClusterInfrastructureNotReadyReason,
				"GradualCluster is ready", "GradualCluster is provisioning"),
			cond(clusterv1.ClusterControlPlaneInitializedCondition, ready, clusterv1.ClusterControlPlaneInitializedReason, clusterv1.ClusterControlPlaneNotInitializedReason,
				"Control plane is initialized", "Control plane is not initialized yet"),
			cond(clusterv1.ClusterControlPlaneAvailableCondition, ready, clusterv1.ClusterControlPlaneAvailableReason, clusterv1.ClusterControlPlaneNotAvailableReason,
				"KubeadmControlPlane is available", "KubeadmControlPlane is not available yet"),
			cond(clusterv1.PausedCondition, spec.Paused, clusterv1.PausedReason, clusterv1.NotPausedReason,
				"Cluster spec.paused is set to true", "Cluster is not paused"),
		},
	}
	if ready {
		st.Phase = string(clusterv1.ClusterPhaseProvisioned)
	} else {
		st.Phase = string(clusterv1.ClusterPhaseProvisioning)
	}
	return st
}

// infraObject is the GradualCluster a Cluster's infrastructureRef names.
func infraObject(namespace string, spec WorkloadSpec) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": InfrastructureGroup + "/v1beta1",
		"kind":       "GradualCluster",
		"metadata": map[string]any{
			"name": spec.Name, "namespace": namespace,
			"labels": map[string]any{clusterv1.ClusterNameLabel: spec.Name},
		},
		"spec": map[string]any{},
	}}
	return u
}

func infraStatus(namespace string, spec WorkloadSpec) *unstructured.Unstructured {
	u := infraObject(namespace, spec)
	delete(u.Object, "spec")
	unstructured.RemoveNestedField(u.Object, "metadata", "labels")
	u.Object["status"] = map[string]any{
		"ready":          spec.Ready,
		"initialization": map[string]any{"provisioned": spec.Ready},
	}
	return u
}

// applyWorkloadObjects writes what CAPI would hold for one workload cluster: the infrastructure
// object, the Cluster with its status, and the kubeconfig Secret (unless the spec says none).
func (f *Fleet) applyWorkloadObjects(ctx context.Context, c client.Client, w *Workload) error {
	f.mu.Lock()
	spec := w.Spec
	cl := clusterObject(f.Namespace, w)
	kubeconfigPath := w.KubeconfigPath
	f.mu.Unlock()

	name := spec.Name
	if spec.ClusterAPI && spec.hasControlPlane() {
		if err := f.clusterAPIManaged(ctx, c, w, kubeconfigPath); err != nil {
			return err
		}
	}
	if err := apply(ctx, c, infraObject(f.Namespace, spec)); err != nil {
		return fmt.Errorf("cluster %s: apply GradualCluster: %w", name, err)
	}
	if err := applyStatus(ctx, c, infraStatus(f.Namespace, spec)); err != nil {
		return fmt.Errorf("cluster %s: GradualCluster status: %w", name, err)
	}
	u, err := toUnstructured(cl)
	if err != nil {
		return err
	}
	delete(u.Object, "status")
	if err := apply(ctx, c, u); err != nil {
		return fmt.Errorf("cluster %s: apply Cluster: %w", name, err)
	}
	if err := f.applyClusterStatus(ctx, c, spec); err != nil {
		return err
	}

	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: f.Namespace, Name: name + "-kubeconfig"}
	var kubeconfig []byte
	switch {
	case spec.NoKubeconfig:
	case spec.ExecKubeconfig:
		kubeconfig, err = execKubeconfig(name)
	default:
		kubeconfig, err = os.ReadFile(kubeconfigPath)
	}
	if err != nil {
		return fmt.Errorf("cluster %s: kubeconfig: %w", name, err)
	}
	if kubeconfig == nil {
		if err := c.Get(ctx, key, secret); err == nil {
			return client.IgnoreNotFound(c.Delete(ctx, secret))
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name": key.Name, "namespace": key.Namespace,
			"labels": map[string]any{clusterv1.ClusterNameLabel: name},
		},
		"type": string(clusterv1.ClusterSecretType),
		"data": map[string]any{"value": encodeBase64(kubeconfig)},
	}}
	if err := apply(ctx, c, s); err != nil {
		return fmt.Errorf("cluster %s: apply kubeconfig Secret: %w", name, err)
	}
	return nil
}

// applyClusterStatus writes the Cluster's status through the status subresource, as CAPI does.
func (f *Fleet) applyClusterStatus(ctx context.Context, c client.Client, spec WorkloadSpec) error {
	var cur clusterv1.Cluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: spec.Name}, &cur); err != nil {
		return fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	st := &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: f.Namespace},
		Status:     clusterStatus(spec, cur.Generation, metav1.NewTime(clock.System{}.Now().Truncate(time.Second))),
	}
	u, err := toUnstructured(st)
	if err != nil {
		return err
	}
	delete(u.Object, "spec")
	if err := applyStatus(ctx, c, u); err != nil {
		return fmt.Errorf("cluster %s: apply status: %w", spec.Name, err)
	}
	return nil
}

// deleteWorkloadObjects removes a workload's Cluster, GradualCluster and kubeconfig Secret.
func (f *Fleet) deleteWorkloadObjects(ctx context.Context, c client.Client, name string) error {
	objs := []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: name + "-kubeconfig"}},
	}
	infra := infraObject(f.Namespace, WorkloadSpec{Name: name})
	objs = append(objs, infra)
	var errs []error
	for _, o := range objs {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cluster %s: delete %T: %w", name, o, err))
		}
	}
	return errors.Join(errs...)
}
