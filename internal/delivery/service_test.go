package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

func kubeconfigSecret(name, token string) *corev1.Secret {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: %[1]s, cluster: {server: "https://%[1]s.example.com:6443"}}]
users: [{name: admin, user: {token: %[2]q}}]
contexts: [{name: %[1]s, context: {cluster: %[1]s, user: admin}}]
current-context: %[1]s
`, name, token)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: fleet.KubeconfigSecretName(name)},
		Data:       map[string][]byte{fleet.KubeconfigSecretKey: []byte(kubeconfig)},
	}
}

// TestServiceReusesClusterClients covers the connection cache: clients are reused until
// connRecheck passes or recheck is called, rebuilt only when the kubeconfig changed, and a
// deleted kubeconfig Secret reads as NotFound (which classify turns into a gone cluster).
func TestServiceReusesClusterClients(t *testing.T) {
	ctx := context.Background()
	mgmt := newFakeClient(kubeconfigSecret("c1", "token-1"))
	svc := New(&fleet.Management{Client: mgmt, RESTConfig: &rest.Config{}}, Options{})
	clock := engine.NewFakeClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	svc.clock = clock

	// Every step is bounded: a cache that deadlocks fails the test instead of hanging it.
	cluster := func(force bool) (*conn, error) {
		t.Helper()
		type answer struct {
			c   *conn
			err error
		}
		done := make(chan answer, 1)
		go func() {
			c, err := svc.cluster(ctx, "fleet", "c1", force)
			done <- answer{c, err}
		}()
		select {
		case a := <-done:
			return a.c, a.err
		case <-time.After(10 * time.Second):
			t.Fatal("Service.cluster did not return within 10 s")
			return nil, nil
		}
	}
	must := func(c *conn, err error) *conn {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	first := must(cluster(false))
	if first.cfg.Host != "https://c1.example.com:6443" || first.cfg.BearerToken != "token-1" || first.cfg.Timeout != fleet.DefaultRequestTimeout {
		t.Fatalf("config %s token %q timeout %s", first.cfg.Host, first.cfg.BearerToken, first.cfg.Timeout)
	}
	if c := must(cluster(false)); c != first {
		t.Error("clients rebuilt within connRecheck")
	}
	svc.recheck("fleet", "c1")
	if c := must(cluster(false)); c != first {
		t.Error("clients rebuilt after a recheck although the kubeconfig did not change")
	}
	clock.Advance(connRecheck + time.Second)
	if c := must(cluster(false)); c != first {
		t.Error("clients rebuilt after connRecheck although the kubeconfig did not change")
	}
	if c := must(cluster(true)); c == first || !c.force {
		t.Error("clients with force_conflicts reuse the unforced ones")
	}

	// A rotated kubeconfig is seen at the next recheck.
	if err := mgmt.Update(ctx, kubeconfigSecret("c1", "token-2")); err != nil {
		t.Fatal(err)
	}
	if c := must(cluster(true)); c.cfg.BearerToken != "token-1" {
		t.Error("kubeconfig read again before connRecheck without a recheck")
	}
	svc.recheck("fleet", "c1")
	rotated := must(cluster(true))
	if rotated.cfg.BearerToken != "token-2" {
		t.Errorf("token %q after rotation, want token-2", rotated.cfg.BearerToken)
	}

	// A deleted kubeconfig Secret is seen at the next recheck, as NotFound.
	if err := mgmt.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "c1-kubeconfig"}}); err != nil {
		t.Fatal(err)
	}
	svc.recheck("fleet", "c1")
	_, err := cluster(true)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("cluster after its kubeconfig Secret was deleted: %v, want a NotFound error", err)
	}
}
