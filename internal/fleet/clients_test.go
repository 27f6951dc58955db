package fleet

import (
	"context"
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

// TestClientsFreshness covers the one freshness rule of workload clients: reused until
// ClientsRecheck passes or Recheck is called, then rebuilt only when the kubeconfig Secret
// changed; a deleted Secret reads as NotFound (which delivery turns into a gone cluster).
func TestClientsFreshness(t *testing.T) {
	ctx := context.Background()
	mgmt := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(kubeconfigSecret("c1", "https://c1.example:6443")).Build()
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	clients := NewClients(&Management{Client: mgmt, RESTConfig: &rest.Config{}}, func() time.Time { return now })

	// Every step is bounded: a cache that deadlocks fails the test instead of hanging it.
	get := func() (*Conn, error) {
		t.Helper()
		type answer struct {
			c   *Conn
			err error
		}
		done := make(chan answer, 1)
		go func() {
			c, err := clients.Get(ctx, "fleet", "c1")
			done <- answer{c, err}
		}()
		select {
		case a := <-done:
			return a.c, a.err
		case <-time.After(10 * time.Second):
			t.Fatal("Clients.Get did not return within 10 s")
			return nil, nil
		}
	}
	must := func(c *Conn, err error) *Conn {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	first := must(get())
	if first.Config.Host != "https://c1.example:6443" || first.Config.Timeout != DefaultRequestTimeout || first.Applier == nil || first.Client == nil {
		t.Fatalf("config %s timeout %s applier %v client %v", first.Config.Host, first.Config.Timeout, first.Applier, first.Client)
	}
	if c := must(get()); c != first {
		t.Error("clients rebuilt within ClientsRecheck")
	}
	if c, err := clients.Client(ctx, "fleet", "c1"); err != nil || c != first.Client {
		t.Errorf("Client: %v, %v; want the cached client", c, err)
	}
	clients.Recheck("fleet", "c1")
	if c := must(get()); c != first {
		t.Error("clients rebuilt after a Recheck although the kubeconfig did not change")
	}
	now = now.Add(ClientsRecheck + time.Second)
	if c := must(get()); c != first {
		t.Error("clients rebuilt after ClientsRecheck although the kubeconfig did not change")
	}

	// A rotated kubeconfig is seen at the next recheck, not before.
	if err := mgmt.Update(ctx, kubeconfigSecret("c1", "https://c1-rotated.example:6443")); err != nil {
		t.Fatal(err)
	}
	if c := must(get()); c != first {
		t.Error("kubeconfig read again before ClientsRecheck without a Recheck")
	}
	now = now.Add(ClientsRecheck + time.Second)
	rotated := must(get())
	if rotated == first || rotated.Config.Host != "https://c1-rotated.example:6443" {
		t.Errorf("host %q after rotation and ClientsRecheck, want the rotated one", rotated.Config.Host)
	}

	// A deleted kubeconfig Secret is seen at the next Recheck, as NotFound.
	if err := mgmt.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "c1-kubeconfig"}}); err != nil {
		t.Fatal(err)
	}
	clients.Recheck("fleet", "c1")
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after the kubeconfig Secret was deleted: %v, want a NotFound error", err)
	}
}

// TestClientsOutliveAManagementOutage: when the management cluster does not answer (a read of
// the kubeconfig Secret fails), the clients that worked stay in use — a rollout restoring a
// workload cluster must not wait on the management cluster — and the next Get asks again. With
// no clients yet, the error is returned.
func TestClientsOutliveAManagementOutage(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	mgmt := interceptor.NewClient(fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(kubeconfigSecret("c1", "https://c1.example:6443")).Build(),
		interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if down.Load() {
				return apierrors.NewTimeoutError("the management API server did not answer", 1)
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	clients := NewClients(&Management{Client: mgmt, RESTConfig: &rest.Config{}}, time.Now)
	down.Store(true)
	if _, err := clients.Get(ctx, "fleet", "c1"); err == nil {
		t.Fatal("Get with no clients yet and the management cluster down: no error")
	}
	down.Store(false)
	first, err := clients.Get(ctx, "fleet", "c1")
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	clients.Recheck("fleet", "c1")
	if c, err := clients.Get(ctx, "fleet", "c1"); err != nil || c != first {
		t.Fatalf("Get during the outage: %v, %v; want the clients that worked", c, err)
	}
	down.Store(false)
	if c, err := clients.Get(ctx, "fleet", "c1"); err != nil || c != first {
		t.Fatalf("Get after the outage: %v, %v", c, err)
	}
}
