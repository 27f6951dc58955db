package acctest

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// The Flux fault tests' controls, shared by the rollout's and the module assignment's: the test
// bed's processes (controllers, registry) stopped and resumed, and where the OCIRepository each
// cluster's Kustomization names is pinned.

// FluxProcess is the pid of the Flux test bed's process called name (kustomize-controller,
// source-controller, oci-registry).
func FluxProcess(t *testing.T, f *testbed.Fleet, name string) int {
	t.Helper()
	for _, p := range f.Flux.Processes {
		if p.Name == name {
			return p.PID
		}
	}
	t.Fatalf("the Flux test bed runs no %s", name)
	return 0
}

// StopProcesses stops (SIGSTOP) pids and returns a func that resumes them (also run at cleanup,
// so a failing test never leaves the bed frozen). A stopped process keeps its sockets open and
// answers nothing: what a hung or partitioned peer looks like to a client.
func StopProcesses(t *testing.T, pids []int) (resume func()) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
	}
	done := false
	resume = func() {
		if done {
			return
		}
		done = true
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// FluxPins is the digest the OCIRepository of key each cluster's Kustomization names is pinned
// to; a cluster without one fails the test.
func FluxPins(t *testing.T, f *testbed.Fleet, key records.Key, clusters []string) map[string]string {
	t.Helper()
	pins, err := FluxPinned(f, key, clusters)
	if err != nil {
		t.Fatal(err)
	}
	return pins
}

// FluxPinned is FluxPins for a check function: an error instead of failing the test. It follows
// each cluster's Kustomization to the OCIRepository it names (shared by the clusters of the
// namespace that run the same artifact), as the engine reads it.
func FluxPinned(f *testbed.Fleet, key records.Key, clusters []string) (map[string]string, error) {
	return eachCluster(f, clusters, func(ctx context.Context, mc client.Client, c string) (string, error) {
		src, err := FluxSource(ctx, mc, f.Namespace, key, c)
		if err != nil {
			return "", err
		}
		digest, _, _ := unstructured.NestedString(src.Object, "spec", "ref", "digest")
		return digest, nil
	})
}

// FluxKustomization is what a cluster's Kustomization of key says of the cluster's values:
// the variables kustomize-controller substitutes there (spec.postBuild.substitute) and its
// generation.
type FluxKustomization struct {
	Substitute map[string]string
	Generation int64
}

// FluxKustomizations reads the Kustomization of key on each of clusters, for a check function:
// an error instead of failing the test.
func FluxKustomizations(f *testbed.Fleet, key records.Key, clusters []string) (map[string]FluxKustomization, error) {
	return eachCluster(f, clusters, func(ctx context.Context, mc client.Client, c string) (FluxKustomization, error) {
		k := fluxdelivery.KustomizationKind
		ks := testbed.FluxObject(k.GroupVersion().String(), k.Kind, f.Namespace, fluxdelivery.ObjectName(key, c))
		if err := mc.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return FluxKustomization{}, fmt.Errorf("%s: its Kustomization of %s: %w", c, key, err)
		}
		sub, _, err := unstructured.NestedStringMap(ks.Object, "spec", "postBuild", "substitute")
		if err != nil {
			return FluxKustomization{}, fmt.Errorf("%s: its Kustomization's postBuild.substitute: %w", c, err)
		}
		return FluxKustomization{Substitute: sub, Generation: ks.GetGeneration()}, nil
	})
}

// eachCluster reads, in f's management cluster, one thing of each of clusters, by cluster.
func eachCluster[T any](f *testbed.Fleet, clusters []string, read func(ctx context.Context, mc client.Client, c string) (T, error)) (map[string]T, error) {
	mc, err := f.ManagementClient()
	if err != nil {
		return nil, err
	}
	// A check function gets no context.
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	out := make(map[string]T, len(clusters))
	for _, c := range clusters {
		if out[c], err = read(ctx, mc, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FluxSource is the OCIRepository cluster's Kustomization of key names in namespace; an error
// when either is missing.
func FluxSource(ctx context.Context, mc client.Client, namespace string, key records.Key, cluster string) (*unstructured.Unstructured, error) {
	src, err := fluxdelivery.New(mc, fluxdelivery.Settings{}, key).Source(ctx, namespace, cluster)
	if err != nil {
		return nil, fmt.Errorf("%s: its OCIRepository of %s: %w", cluster, key, err)
	}
	if src == nil {
		return nil, fmt.Errorf("%s: no Kustomization of %s, or no OCIRepository it names", cluster, key)
	}
	return src, nil
}

// FluxSources names the OCIRepositories of key in namespace (by the rollout's label, as the
// engine lists them): shared by clusters, they name none.
func FluxSources(ctx context.Context, mc client.Client, namespace string, key records.Key) ([]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(fluxdelivery.OCIRepositoryKind.GroupVersion().WithKind("OCIRepositoryList"))
	if err := mc.List(ctx, list, client.InNamespace(namespace),
		client.MatchingLabels{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: key.Hash()}); err != nil {
		return nil, fmt.Errorf("list the OCIRepositories of %s: %w", key, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, o := range list.Items {
		names = append(names, o.GetName())
	}
	return names, nil
}
