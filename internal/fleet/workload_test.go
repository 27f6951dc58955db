package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func kubeconfigFor(server string) []byte {
	return []byte(`apiVersion: v1
kind: Config
current-context: w
clusters: [{name: w, cluster: {server: "` + server + `"}}]
contexts: [{name: w, context: {cluster: w, user: u}}]
users: [{name: u, user: {token: t}}]
`)
}

func kubeconfigSecret(cluster, server string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: KubeconfigSecretName(cluster)},
		Data:       map[string][]byte{KubeconfigSecretKey: kubeconfigFor(server)},
	}
}

// Discover's list of the kubeconfig Secrets serves the reads of each cluster's Secret that
// follow it (one list, not one read per cluster), for listedFresh; a Secret gone from the list is
// read on its own, and a rotated one is picked up by the next list.
func TestWorkloadConfigFromList(t *testing.T) {
	ctx := context.Background()
	var gets atomic.Int32
	c := fake.NewClientBuilder().WithScheme(Scheme()).
		WithObjects(kubeconfigSecret("a", "https://a.example:6443"), kubeconfigSecret("b", "https://b.example:6443")).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &Management{Client: c, RESTConfig: &rest.Config{QPS: 7, Burst: 9}}
	m.workloads.now = func() time.Time { return now }

	if _, err := m.kubeconfigSecrets(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "a"} {
		cfg, err := m.config(ctx, "fleet", name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(cfg.Host, "https://"+name+".example") || cfg.QPS != 7 || cfg.Burst != 9 {
			t.Fatalf("%s: host %s QPS %v burst %d", name, cfg.Host, cfg.QPS, cfg.Burst)
		}
	}
	if n := gets.Load(); n != 0 {
		t.Fatalf("%d Secret reads after a list, want 0", n)
	}

	// b deleted, a rotated: the next list shows both.
	if err := c.Delete(ctx, kubeconfigSecret("b", "")); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, kubeconfigSecret("a", "https://a2.example:6443")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.kubeconfigSecrets(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	if cfg, err := m.config(ctx, "fleet", "a"); err != nil || cfg.Host != "https://a2.example:6443" {
		t.Fatalf("rotated kubeconfig: %v %v", cfg, err)
	}
	if _, err := m.config(ctx, "fleet", "b"); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted Secret: %v, want NotFound", err)
	}
	if n := gets.Load(); n != 1 {
		t.Fatalf("%d Secret reads, want 1 (the Secret missing from the list)", n)
	}

	// Once the list is stale, each cluster's Secret is read again.
	now = now.Add(listedFresh + time.Second)
	if _, err := m.config(ctx, "fleet", "a"); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 2 {
		t.Fatalf("%d Secret reads, want 2 (a stale list is not used)", n)
	}
}

// A rollout about to change a cluster reads its kubeconfig Secret itself, even while Discover's
// list is fresh: a Secret deleted since the list is seen.
func TestForgetListedReadsTheSecretAgain(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(Scheme()).
		WithObjects(kubeconfigSecret("a", "https://a.example:6443"), kubeconfigSecret("b", "https://b.example:6443")).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &Management{Client: c, RESTConfig: &rest.Config{}}
	m.workloads.now = func() time.Time { return now }
	if _, err := m.kubeconfigSecrets(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	// a's Secret is deleted within the list's freshness: served from the list, it would still work.
	if err := c.Delete(ctx, kubeconfigSecret("a", "")); err != nil {
		t.Fatal(err)
	}
	m.ForgetListed("fleet", "a")
	if _, err := m.config(ctx, "fleet", "a"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a after ForgetListed: err %v, want its Secret not found", err)
	}
	if _, err := m.config(ctx, "fleet", "b"); err != nil {
		t.Fatalf("b: %v (ForgetListed dropped more than a)", err)
	}
}

// config is workloadConfig without the version.
func (m *Management) config(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cfg, _, err := m.workloadConfig(ctx, namespace, name)
	return cfg, err
}
