package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// workloadConfigs caches one REST config per workload cluster, keyed by the kubeconfig Secret's
// UID and resourceVersion, so that a plan or apply over hundreds of clusters parses each
// kubeconfig once and a rotated kubeconfig is picked up.
type workloadConfigs struct {
	mu      sync.Mutex
	entries map[string]workloadConfig
	// listed holds, per namespace, the kubeconfig Secrets as Discover last listed them (see
	// listedFresh): a plan over a thousand clusters then costs the management cluster one list
	// instead of a thousand reads.
	listed map[string]listedSecrets
	now    func() time.Time // the wall clock unless a test says otherwise
}

type listedSecrets struct {
	at      time.Time
	secrets map[string]listedSecret // by Secret name
}

type listedSecret struct {
	version string
	value   []byte
}

// listedFresh is how long Discover's list of kubeconfig Secrets stands in for reading each one.
// Every plan and apply discovers the fleet first and then reads each picked cluster's Secret at
// once; a few seconds cover that and still see a Secret rotated or deleted before the next
// discovery (and a rollout's own gone-check reads the Secret itself).
const listedFresh = 5 * time.Second

func (w *workloadConfigs) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return clock.System{}.Now()
}

// remember replaces the listed kubeconfig Secrets of namespace: one that is gone from the list is
// gone from the snapshot too, and is then read (and found missing) on its own.
func (w *workloadConfigs) remember(namespace string, items []corev1.Secret) {
	secrets := make(map[string]listedSecret, len(items))
	for i := range items {
		s := &items[i]
		if !strings.HasSuffix(s.Name, kubeconfigSecretSuffix) {
			continue // only what workloadConfig reads is kept
		}
		if value, ok := s.Data[KubeconfigSecretKey]; ok && len(value) > 0 {
			secrets[s.Name] = listedSecret{version: string(s.UID) + "/" + s.ResourceVersion, value: value}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listed == nil {
		w.listed = map[string]listedSecrets{}
	}
	w.listed[namespace] = listedSecrets{at: w.clock(), secrets: secrets}
}

// ForgetListed drops the kubeconfig Secret of the workload cluster namespace/name from the last
// list, so that the next workloadConfig reads the Secret itself. A rollout calls it before it
// changes a cluster: a Secret deleted or rotated seconds ago must be seen then, not after the
// list goes stale.
func (m *Management) ForgetListed(namespace, name string) {
	m.workloads.mu.Lock()
	defer m.workloads.mu.Unlock()
	if l, ok := m.workloads.listed[namespace]; ok {
		delete(l.secrets, KubeconfigSecretName(name))
	}
}

// fromList returns the kubeconfig Secret name as last listed, if that list is fresh.
func (w *workloadConfigs) fromList(namespace, name string) (listedSecret, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.listed[namespace]
	if !ok || w.clock().Sub(l.at) > listedFresh {
		return listedSecret{}, false
	}
	s, ok := l.secrets[name]
	return s, ok
}

type workloadConfig struct {
	version string
	cfg     *rest.Config
}

// workloadConfig returns a REST config for the workload cluster namespace/name, built from its
// `<name>-kubeconfig` Secret, and the version (UID/resourceVersion) of the Secret it was built
// from. Errors name the cluster and never quote the kubeconfig. Clients is its caller: it
// decides when to look again.
// secretUnread is a kubeconfig Secret the management cluster did not return (slow, paused,
// throttled), as opposed to one it says is gone or holds no usable kubeconfig: the message is
// the API error's, and callers may keep the clients they have (see Clients.Get).
type secretUnread struct{ err error }

func (e secretUnread) Error() string { return e.err.Error() }
func (e secretUnread) Unwrap() error { return e.err }

func (m *Management) workloadConfig(ctx context.Context, namespace, name string) (*rest.Config, string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: KubeconfigSecretName(name)}
	listed, ok := m.workloads.fromList(namespace, key.Name)
	if !ok {
		var secret corev1.Secret
		if err := m.Client.Get(ctx, key, &secret); err != nil {
			if apierrors.IsNotFound(err) {
				// Wrapped, so that callers can tell a deleted Secret (the cluster is gone) from a
				// failed read (the management API is unwell) with apierrors.IsNotFound.
				return nil, "", fmt.Errorf("cluster %s/%s: kubeconfig Secret %s not found: %w", namespace, name, key.Name, err)
			}
			return nil, "", fmt.Errorf("cluster %s/%s: read kubeconfig Secret %s: %w", namespace, name, key.Name, secretUnread{err})
		}
		listed = listedSecret{version: string(secret.UID) + "/" + secret.ResourceVersion, value: secret.Data[KubeconfigSecretKey]}
	}
	version := listed.version
	m.workloads.mu.Lock()
	defer m.workloads.mu.Unlock()
	if e, ok := m.workloads.entries[namespace+"/"+name]; ok && e.version == version {
		return rest.CopyConfig(e.cfg), version, nil
	}
	cfg, err := WorkloadRESTConfig(listed.value)
	if err != nil {
		return nil, "", fmt.Errorf("cluster %s/%s: %w", namespace, name, err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = m.RESTConfig.QPS, m.RESTConfig.Burst, m.RESTConfig.UserAgent
	// Every request to a workload cluster is bounded: an API server that accepts connections and
	// never answers must fail the request (an infrastructure error, retried), not hang the wave.
	cfg.Timeout = RequestTimeout(m.RESTConfig)
	if m.workloads.entries == nil {
		m.workloads.entries = map[string]workloadConfig{}
	}
	m.workloads.entries[namespace+"/"+name] = workloadConfig{version: version, cfg: cfg}
	return rest.CopyConfig(cfg), version, nil
}

// DefaultRequestTimeout bounds one request to a management or workload API server when the
// provider configuration sets none. Long waits (verification) are loops of short requests, so
// this never limits how long a rollout may wait for readiness.
const DefaultRequestTimeout = 30 * time.Second

// RequestTimeout is the per-request timeout of cfg, or DefaultRequestTimeout when it has none.
func RequestTimeout(cfg *rest.Config) time.Duration {
	if cfg != nil && cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return DefaultRequestTimeout
}

// GoneReason says whether the workload cluster namespace/name has left the fleet: its Cluster
// object deleted or being deleted (ClusterGoneReason), or its kubeconfig Secret deleted. It
// returns "" while the cluster is still there, and an error when the management cluster cannot be
// read (which says nothing either way). Rollouts ask it when a cluster stops answering, so that a
// cluster torn down mid-rollout is set aside instead of counted as a failure of the revision.
func (m *Management) GoneReason(ctx context.Context, namespace, name string) (string, error) {
	if reason, err := m.ClusterGoneReason(ctx, namespace, name); reason != "" || err != nil {
		return reason, err
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	switch err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: KubeconfigSecretName(name)}, secret); {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("kubeconfig Secret %s/%s was deleted", namespace, KubeconfigSecretName(name)), nil
	case err != nil:
		return "", fmt.Errorf("read kubeconfig Secret %s/%s: %w", namespace, KubeconfigSecretName(name), err)
	}
	return "", nil
}

// ClusterGoneReason is GoneReason judged by the Cluster object alone, reading no Secret: what
// delivery through Flux asks, whose credentials need nothing on the Clusters' Secrets (a
// kubeconfig Secret deleted under a live Cluster fails the cluster's Kustomization instead).
func (m *Management) ClusterGoneReason(ctx context.Context, namespace, name string) (string, error) {
	cluster, err := m.clusterMetadata(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("Cluster %s/%s was deleted", namespace, name), nil
	case err != nil:
		return "", fmt.Errorf("read Cluster %s/%s: %w", namespace, name, err)
	case !cluster.DeletionTimestamp.IsZero():
		return fmt.Sprintf("Cluster %s/%s is being deleted", namespace, name), nil
	}
	return "", nil
}

// clusterMetadata reads the metadata of the Cluster namespace/name (a NotFound error when there is
// none).
func (m *Management) clusterMetadata(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	version, err := m.ClusterAPIVersion(ctx)
	if err != nil {
		return nil, err
	}
	cluster := &metav1.PartialObjectMetadata{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: ClusterAPIGroup, Version: version, Kind: "Cluster"})
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return nil, err
	}
	return cluster, nil
}
