// Package ownertest is the fake management cluster the in-place packages' tests share: Cluster
// API objects (a Cluster with a MachineDeployment, or one built from a ClusterClass) in a
// controller-runtime fake client that records every write. It names the Cluster API kinds and
// labels itself, so that owners' own tests can use it.
package ownertest

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The Cluster API kinds, labels and condition the fixtures are made of (v1beta2).
var (
	MachineDeploymentGVK     = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	MachineGVK               = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	ClusterGVK               = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	ClusterClassGVK          = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}
	KubeadmControlPlaneGVK   = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
	KubeadmConfigTemplateGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"}
	DevMachineTemplateGVK    = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevMachineTemplate"}
	KubeadmConfigGVK         = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	DevMachineGVK            = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevMachine"}
	// DeploymentGVK: the Cluster API managers' Deployments, read for the feature gate.
	DeploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// The Cluster API labels and condition type the fixtures set.
const (
	ClusterNameLabel            = "cluster.x-k8s.io/cluster-name"
	TopologyOwnedLabel          = "topology.cluster.x-k8s.io/owned"
	TopologyReconciledCondition = "TopologyReconciled"
)

// Obj is an object of gvk named name in namespace "fleet" with fields.
func Obj(gvk schema.GroupVersionKind, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace("fleet")
	u.SetName(name)
	return u
}

// World is a management cluster with one Cluster "c" and a zero-replica MachineDeployment
// "md-0" (so no Machines and no extension calls) whose status says it is rolled out; writes is
// every mutating call, as "verb Kind name".
func World(t *testing.T, mdSpec map[string]any, mdAnnotations map[string]string) (client.Client, *[]string) {
	t.Helper()
	return WorldWithCluster(t, mdSpec, mdAnnotations, false, true)
}

// WorldWithCluster is World with the Cluster paused or not, and ready or not.
func WorldWithCluster(t *testing.T, mdSpec map[string]any, mdAnnotations map[string]string, clusterPaused, clusterReady bool) (client.Client, *[]string) {
	t.Helper()
	mapper := namespacedMapper(MachineDeploymentGVK, MachineGVK, ClusterGVK, KubeadmControlPlaneGVK, KubeadmConfigTemplateGVK, DevMachineTemplateGVK, KubeadmConfigGVK, DevMachineGVK, DeploymentGVK)
	spec := map[string]any{
		"clusterName": "c", "replicas": int64(0),
		"template": map[string]any{"spec": map[string]any{
			"clusterName": "c", "version": "v1.34.0",
			"bootstrap":         map[string]any{"configRef": map[string]any{"apiGroup": KubeadmConfigTemplateGVK.Group, "kind": KubeadmConfigTemplateGVK.Kind, "name": "md-0"}},
			"infrastructureRef": map[string]any{"apiGroup": DevMachineTemplateGVK.Group, "kind": DevMachineTemplateGVK.Kind, "name": "md-0"},
		}},
		"rollout": map[string]any{"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(0), "maxUnavailable": int64(1)}}},
	}
	for k, v := range mdSpec {
		spec[k] = v
	}
	md := Obj(MachineDeploymentGVK, "md-0", map[string]any{"spec": spec, "status": map[string]any{"observedGeneration": int64(1)}})
	md.SetGeneration(1)
	md.SetAnnotations(mdAnnotations)
	objs := []client.Object{
		md,
		Obj(ClusterGVK, "c", map[string]any{"spec": map[string]any{"paused": clusterPaused}, "status": map[string]any{"initialization": map[string]any{"controlPlaneInitialized": clusterReady}}}),
		Obj(KubeadmConfigTemplateGVK, "md-0", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"files": []any{}}}}}),
		Obj(DevMachineTemplateGVK, "md-0", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}}}}}}),
	}
	writes := &[]string{}
	var mu sync.Mutex
	note := func(verb string, o client.Object) {
		mu.Lock()
		defer mu.Unlock()
		*writes = append(*writes, verb+" "+o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetName())
	}
	c := fake.NewClientBuilder().WithRESTMapper(mapper).WithScheme(runtime.NewScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				note("create", o)
				return c.Create(ctx, o, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
				note("patch", o)
				return c.Patch(ctx, o, p, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
				note("update", o)
				return c.Update(ctx, o, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
				note("delete", o)
				return c.Delete(ctx, o, opts...)
			},
		}).Build()
	return c, writes
}

// TopologyWorld is a management cluster with Cluster "c" built from ClusterClass "cc" at
// v1.34.0: a KubeadmControlPlane "c-cp" and MachineDeployments "c-md-a" and "c-md-b" the
// topology made (labelled), "extra" it did not make, all with zero replicas (so no Machines and
// no extension calls), rolled out. failPatch, when set, fails every patch of a Cluster with it.
func TopologyWorld(t *testing.T, failPatch error) (client.Client, *[]string) {
	t.Helper()
	mapper := namespacedMapper(MachineDeploymentGVK, MachineGVK, ClusterGVK, ClusterClassGVK, KubeadmControlPlaneGVK, DeploymentGVK)
	owned := map[string]string{ClusterNameLabel: "c", TopologyOwnedLabel: ""}
	cluster := Obj(ClusterGVK, "c", map[string]any{
		"spec": map[string]any{
			"controlPlaneRef": map[string]any{"apiGroup": KubeadmControlPlaneGVK.Group, "kind": KubeadmControlPlaneGVK.Kind, "name": "c-cp"},
			"topology": map[string]any{"classRef": map[string]any{"name": "cc"}, "version": "v1.34.0",
				"variables": []any{map[string]any{"name": "other", "value": map[string]any{"keep": true}}, map[string]any{"name": "note", "value": "a"}}},
		},
		"status": map[string]any{
			"initialization":     map[string]any{"controlPlaneInitialized": true},
			"observedGeneration": int64(1),
			"conditions":         []any{map[string]any{"type": TopologyReconciledCondition, "status": "True", "reason": "ReconcileSucceeded", "observedGeneration": int64(1)}},
		},
	})
	cluster.SetGeneration(1)
	kcp := Obj(KubeadmControlPlaneGVK, "c-cp", map[string]any{
		"spec":   map[string]any{"replicas": int64(0), "version": "v1.34.0", "rollout": map[string]any{"strategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": int64(0)}}}},
		"status": map[string]any{"observedGeneration": int64(1)},
	})
	kcp.SetLabels(owned)
	md := func(name string, l map[string]string) *unstructured.Unstructured {
		u := Obj(MachineDeploymentGVK, name, map[string]any{
			"spec": map[string]any{
				"clusterName": "c", "replicas": int64(0),
				"template": map[string]any{"spec": map[string]any{"clusterName": "c", "version": "v1.34.0"}},
				"rollout":  map[string]any{"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(0), "maxUnavailable": int64(1)}}},
			},
			"status": map[string]any{"observedGeneration": int64(1)},
		})
		u.SetLabels(l)
		return u
	}
	objs := []client.Object{
		cluster, kcp,
		md("c-md-b", owned), md("c-md-a", owned), md("extra", map[string]string{ClusterNameLabel: "c", "pool": "extra"}),
		Obj(ClusterClassGVK, "cc", map[string]any{
			"spec": map[string]any{"kubernetesVersions": []any{"v1.34.0", "v1.34.1", "v1.35.0"}, "variables": []any{map[string]any{"name": "note"}, map[string]any{"name": "other"}}},
			// "count" is discovered from a patch's runtime extension: in the status only.
			"status": map[string]any{"variables": []any{map[string]any{"name": "count"}, map[string]any{"name": "note"}, map[string]any{"name": "other"}}},
		}),
	}
	writes := &[]string{}
	var mu sync.Mutex
	c := fake.NewClientBuilder().WithRESTMapper(mapper).WithScheme(runtime.NewScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
				what := "patch "
				if (&client.PatchOptions{}).ApplyOptions(opts).DryRun != nil {
					what = "dry-run patch "
				}
				mu.Lock()
				*writes = append(*writes, what+o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetName())
				mu.Unlock()
				if failPatch != nil && o.GetObjectKind().GroupVersionKind().Kind == "Cluster" {
					return failPatch
				}
				return c.Patch(ctx, o, p, opts...)
			},
		}).Build()
	return c, writes
}

// Edit reads the object kind/name, changes it with f and writes it back (as a controller would).
func Edit(t *testing.T, c client.Client, gvk schema.GroupVersionKind, name string, f func(u *unstructured.Unstructured)) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: name}, u); err != nil {
		t.Fatal(err)
	}
	f(u)
	if err := c.Update(t.Context(), u); err != nil {
		t.Fatal(err)
	}
}

// FleetClusterWorld is World's cluster "c" with a control plane reference and its MachineDeployment
// labelled as CAPI labels it (cluster name) and pool=workers.
func FleetClusterWorld(t *testing.T, mdAnnotations map[string]string) (client.Client, *[]string) {
	t.Helper()
	c, writes := World(t, nil, mdAnnotations)
	Edit(t, c, MachineDeploymentGVK, "md-0", func(u *unstructured.Unstructured) {
		u.SetLabels(map[string]string{ClusterNameLabel: "c", "pool": "workers"})
	})
	Edit(t, c, ClusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"apiGroup": KubeadmControlPlaneGVK.Group, "kind": KubeadmControlPlaneGVK.Kind, "name": "c-cp"}, "spec", "controlPlaneRef")
	})
	*writes = (*writes)[:0]
	return c, writes
}

// namespacedMapper maps the namespaced kinds gvks, as the API server of a management cluster
// would.
func namespacedMapper(gvks ...schema.GroupVersionKind) meta.RESTMapper {
	var gvs []schema.GroupVersion
	for _, gvk := range gvks {
		gvs = append(gvs, gvk.GroupVersion())
	}
	mapper := meta.NewDefaultRESTMapper(gvs)
	for _, gvk := range gvks {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	return mapper
}
