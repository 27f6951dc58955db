package delivery

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestFluxDestroyLeavesUnrecordedKustomizations: destroy through Flux of a rollout that has no
// record of c1 in its record namespace (another state created the rollout again with another
// record_namespace, or c1's records were deleted) leaves c1's Kustomization, which it would
// otherwise delete (the Kustomization is named after the rollout alone, so it is the other
// state's, and Flux prunes what it applied: TestAccRollout_fluxContract_secondStateOtherRecordNamespace),
// and says so; c2, which it has a record of, is removed as usual.
func TestFluxDestroyLeavesUnrecordedKustomizations(t *testing.T) {
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := context.Background()
	for _, c := range []string{"c1", "c2"} {
		if err := w.Apply(ctx, c, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	canonical, err := w.spec.Objects.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.fluxStore(w.spec.RecordNamespace).MarkProvisioning(ctx, FluxRecordKey(w.spec.Key, "c2"),
		records.Revision{Revision: "r1", Manifests: canonical}); err != nil {
		t.Fatal(err)
	}
	w.spec.Policy.UpdateLimit = engine.UpdateLimitOf(2)
	w.svc.concurrency = 2
	w.svc.discover = func(context.Context, fleet.Query) (*fleet.Discovery, error) {
		return &fleet.Discovery{Clusters: []fleet.Cluster{{Namespace: "fleet", Name: "c1"}, {Namespace: "fleet", Name: "c2"}}}, nil
	}
	warnings, err := w.svc.Destroy(ctx, DestroyRequest{Spec: w.spec, Query: fleet.Query{Namespace: "fleet"}})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(c string) bool {
		o := fluxObject(fluxdelivery.KustomizationKind, fluxdelivery.ObjectName(w.spec.Key, c))
		return mgmt.Get(ctx, client.ObjectKeyFromObject(o), o) == nil
	}
	if !exists("c1") {
		t.Error("c1's Kustomization, of which the rollout has no record, was deleted (Flux would prune what runs there)")
	}
	if exists("c2") {
		t.Error("c2's Kustomization is still there after destroy")
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "c1: its Kustomization") || !strings.Contains(warnings[0], "left in place") {
		t.Errorf("warnings %q, want one saying c1's Kustomization is left in place", warnings)
	}
}
