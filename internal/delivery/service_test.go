package delivery

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
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

// TestServiceSharesClusterClients: a rollout's clients are fleet.Clients' shared ones (one
// connection per cluster, whatever the rollout), with the rollout's own force_conflicts and
// field manager.
func TestServiceSharesClusterClients(t *testing.T) {
	ctx := context.Background()
	clients := fleet.NewClients(&fleet.Management{Client: newFakeClient(kubeconfigSecret("c1", "token-1")), RESTConfig: &rest.Config{}}, nil)
	svc := New(clients, settings.Settings{})
	shared, err := clients.Get(ctx, "fleet", "c1")
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: "rollout", Namespace: "fleet", Name: "web"}
	plain, err := svc.cluster(ctx, "fleet", "c1", key, false)
	if err != nil {
		t.Fatal(err)
	}
	forced, err := svc.cluster(ctx, "fleet", "c1", key, true)
	if err != nil {
		t.Fatal(err)
	}
	if plain.client != shared.Client || forced.client != shared.Client || plain.cfg.BearerToken != "token-1" {
		t.Error("a rollout's clients are not the shared ones")
	}
	if a, ok := plain.applier.(*apply.Applier); !ok || a == shared.Applier || a.ForceConflicts() || a.Client() != shared.Client ||
		a.FieldManager() != "gradual/rollout/fleet/web" || plain.manager != a.FieldManager() {
		t.Error("the rollout gets a copy of the shared Applier with its own field manager")
	}
	if shared.Applier.ForceConflicts() || shared.Applier.FieldManager() != apply.DefaultFieldManager {
		t.Error("the shared Applier changed")
	}
	if a, ok := forced.applier.(*apply.Applier); !ok || a == shared.Applier || !a.ForceConflicts() || a.Client() != shared.Client ||
		a.FieldManager() != "gradual/rollout/fleet/web" {
		t.Error("with force_conflicts the rollout gets a forcing copy of the shared Applier, with its own field manager")
	}
}
