package delivery

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestFluxPinsHealthChecks: through Flux, verify.health_checks become the healthCheckExprs of
// the Kustomization that pins the desired revision, which kustomize-controller judges its
// objects by; a revision restored from the records is pinned without them (judged by kstatus
// alone, as a direct restore is).
func TestFluxPinsHealthChecks(t *testing.T) {
	ctx := context.Background()
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	checker, err := health.Compile([]health.Rule{{APIVersion: "v1", Kind: "ConfigMap", Current: "true", Failed: "data.a == 'bad'"}})
	if err != nil {
		t.Fatal(err)
	}
	w.spec.Health = checker
	w.engine = w.svc.engine.run(w)
	exprs := func() []any {
		t.Helper()
		ks := fluxObject(fluxdelivery.KustomizationKind, fluxdelivery.ObjectName(w.spec.Key, "c1"))
		if err := mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			t.Fatalf("the pinned Kustomization: %v", err)
		}
		got, _, _ := unstructured.NestedSlice(ks.Object, "spec", "healthCheckExprs")
		return got
	}
	if err := w.Apply(ctx, "c1", "r1"); err != nil {
		t.Fatal(err)
	}
	got := exprs()
	if len(got) != 1 || got[0].(map[string]any)["failed"] != "data.a == 'bad'" {
		t.Fatalf("healthCheckExprs = %v, want the rollout's health check", got)
	}

	// r2 fails and r1 is restored from the cluster's records: no health checks on that pin.
	canonical, err := w.spec.Objects.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.fluxStore(w.spec.RecordNamespace).MarkProvisioning(ctx, FluxRecordKey(w.spec.Key, "c1"),
		records.Revision{Revision: "r1", Manifests: canonical}); err != nil {
		t.Fatal(err)
	}
	w.spec.Revision = "r2"
	w.engine = w.svc.engine.run(w)
	if err := w.engine.(*fluxRun).fluxPin(ctx, "c1", "r1"); err != nil {
		t.Fatal(err)
	}
	if got := exprs(); len(got) != 0 {
		t.Errorf("healthCheckExprs = %v on the restored revision, want none", got)
	}
	if err := w.engine.(*fluxRun).fluxPin(ctx, "c1", "r2"); err != nil {
		t.Fatal(err)
	}
	if got := exprs(); len(got) != 1 {
		t.Errorf("healthCheckExprs = %v on the desired revision, want the health check", got)
	}
}
