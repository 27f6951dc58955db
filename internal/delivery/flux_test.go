package delivery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
)

// TestFluxAsksTheManagementClusterWithoutSecrets checks that the Service delivering through
// Flux lists the fleet and asks whether a cluster is gone without reading kubeconfig Secrets
// (fleet.Query.WithoutSecrets, ClusterGoneReason), and that the direct Service still reads them.
// What fleet then reads is fleet's own test (TestDiscoverWithoutSecrets).
func TestFluxAsksTheManagementClusterWithoutSecrets(t *testing.T) {
	for _, tc := range []struct {
		name string
		flux *fluxdelivery.Settings
	}{
		{"direct", nil},
		{"flux", &fluxdelivery.Settings{Repository: "oci://registry.example/fleet/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.flux != nil
			var queries []fleet.Query
			var gone []bool
			direct := &Service{clock: engine.SystemClock{}, retryWait: time.Millisecond,
				discover: func(_ context.Context, q fleet.Query) (*fleet.Discovery, error) {
					queries = append(queries, q)
					return &fleet.Discovery{}, nil
				},
				goneReason: func(_ context.Context, _, _ string, withoutSecrets bool) (string, error) {
					gone = append(gone, withoutSecrets)
					return "", nil
				}}
			svc := direct.WithFlux(tc.flux)
			ctx := context.Background()
			if _, err := svc.Discover(ctx, fleet.Query{Namespace: "fleet"}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.placedElsewhere(ctx, "fleet", []string{"c2"}, nil); err != nil {
				t.Fatal(err)
			}
			w := &world{svc: svc, spec: Spec{ClusterNamespace: "fleet"}, logf: func(string, map[string]any) {}}
			if err := w.classify(ctx, "c1", errors.New("connection refused")); err == nil {
				t.Fatal("classify lost the error")
			}
			if len(queries) != 2 || len(gone) != 1 {
				t.Fatalf("%d fleet lists and %d gone checks, want 2 and 1", len(queries), len(gone))
			}
			for _, q := range queries {
				if q.WithoutSecrets != want {
					t.Errorf("fleet listed with WithoutSecrets=%t, want %t", q.WithoutSecrets, want)
				}
			}
			if gone[0] != want {
				t.Errorf("gone check withoutSecrets=%t, want %t", gone[0], want)
			}
		})
	}
}
