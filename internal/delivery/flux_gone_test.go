package delivery

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestFluxDeletedClustersLeave: earlier runs changed c1, c2 and c3; c1 is still picked, c3 was
// relabelled out of the selector, and c2's Cluster was deleted. Delivering directly only c3
// leaves (nothing is left of c2); through Flux c2 leaves too, since its Kustomization,
// OCIRepository and records are in the management cluster and would deliver the old revision to
// a Cluster re-created under its name.
func TestFluxDeletedClustersLeave(t *testing.T) {
	for _, tc := range []struct {
		name        string
		flux        *FluxSettings
		wantLeaving []string
	}{
		{"direct", nil, []string{"c3"}},
		{"flux", &FluxSettings{Repository: "oci://registry.example/fleet/web"}, []string{"c2", "c3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := (&Service{engine: directEngine{}, discover: func(_ context.Context, q fleet.Query) (*fleet.Discovery, error) {
				d := &fleet.Discovery{}
				if slices.Contains(q.Names, "c3") {
					d.Clusters = []fleet.Cluster{{Namespace: "fleet", Name: "c3"}}
				}
				return d, nil
			}}).WithFlux(tc.flux)
			obs := &Observation{Discovery: &fleet.Discovery{Clusters: []fleet.Cluster{{Namespace: "fleet", Name: "c1"}}}}
			if err := svc.observeLeaving(context.Background(), "fleet", &records.Progress{Placed: []string{"c1", "c2", "c3"}}, obs); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(obs.Leaving, tc.wantLeaving) {
				t.Errorf("leaving %v, want %v", obs.Leaving, tc.wantLeaving)
			}
			// Placed keeps them until they have left (a run rewrites it from Placed).
			if want := append([]string{"c1"}, tc.wantLeaving...); !slices.Equal(obs.Placed, want) {
				t.Errorf("placed %v, want %v", obs.Placed, want)
			}
		})
	}
}

// TestFluxDestroyRemovesDeletedClusters: destroy of a rollout whose Cluster c1 was deleted since
// it was pinned removes c1's Kustomization and OCIRepository (and records) all the same.
func TestFluxDestroyRemovesDeletedClusters(t *testing.T) {
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := context.Background()
	if err := w.Apply(ctx, "c1", "r1"); err != nil {
		t.Fatal(err)
	}
	if got := rolloutFluxObjects(t, mgmt, w.spec.Key, fluxdelivery.OCIRepositoryKind); len(got) != 1 {
		t.Fatalf("OCIRepositories of the rollout once pinned: %v, want one", got)
	}
	// Its records, as a run that pinned it leaves them (a Kustomization the rollout has no record
	// of is left alone: TestFluxDestroyLeavesUnrecordedKustomizations).
	canonical, err := w.spec.Objects.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.fluxStore(w.spec.RecordNamespace).MarkProvisioning(ctx, FluxRecordKey(w.spec.Key, "c1"),
		records.Revision{Revision: "r1", Manifests: canonical}); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.managementStore(w.spec.RecordNamespace).SaveProgress(ctx, w.spec.Key, records.Progress{Phase: records.PhaseSucceeded, Placed: []string{"c1"}}); err != nil {
		t.Fatal(err)
	}
	w.spec.Policy.UpdateLimit = engine.UpdateLimitOf(1)
	w.svc.concurrency = 4
	w.svc.discover = func(context.Context, fleet.Query) (*fleet.Discovery, error) { return &fleet.Discovery{}, nil } // c1 is gone
	if _, err := w.svc.Destroy(ctx, DestroyRequest{Spec: w.spec, Query: fleet.Query{Namespace: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{fluxdelivery.KustomizationKind, fluxdelivery.OCIRepositoryKind} {
		if got := rolloutFluxObjects(t, mgmt, w.spec.Key, gvk); len(got) > 0 {
			t.Errorf("%ss of the deleted cluster after destroy: %v, want them gone", gvk.Kind, got)
		}
	}
}
