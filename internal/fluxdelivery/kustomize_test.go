package fluxdelivery

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// pinned pins d on cluster c1 and returns the Kustomization's spec as the management cluster
// holds it.
func pinned(t *testing.T, mgmt client.Client, d *Delivery) map[string]any {
	t.Helper()
	ctx := context.Background()
	if _, err := d.Pin(ctx, "fleet", "c1", Pinning{Digest: digest, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ks := d.object(KustomizationKind, "fleet", "c1")
	if err := mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(ks.Object, "spec")
	return spec
}

// TestPinShapesKustomization checks what a module's Kustomization says beyond its revision: its
// depends_on as Flux's dependsOn naming the other modules' Kustomizations on the same cluster,
// ApplyOnce as the IfNotPresent annotation on every object (commonMetadata), and neither for a
// rollout, nor once a later pin drops them.
func TestPinShapesKustomization(t *testing.T) {
	mgmt := fake.NewClientBuilder().Build()
	settings := Settings{Repository: "oci://registry.example/fleet/base"}
	crds := records.Key{Kind: records.KindModule, Namespace: "fleet", Name: "base.crds"}
	app := records.Key{Kind: records.KindModule, Namespace: "fleet", Name: "base.app"}

	spec := pinned(t, mgmt, New(mgmt, settings, app).WithKustomize(Kustomize{DependsOn: []records.Key{crds}, ApplyOnce: true}))
	want := []any{map[string]any{"name": ObjectName(crds, "c1")}}
	if !reflect.DeepEqual(spec["dependsOn"], want) {
		t.Errorf("dependsOn = %v, want %v (the crds module's Kustomization on the same cluster)", spec["dependsOn"], want)
	}
	annotations, _, _ := unstructured.NestedStringMap(spec, "commonMetadata", "annotations")
	if annotations[AnnotationSSA] != SSAIfNotPresent {
		t.Errorf("commonMetadata.annotations = %v, want %s: %s (ApplyOnce)", annotations, AnnotationSSA, SSAIfNotPresent)
	}

	// Mode Reconcile and no dependency any more: the next pin removes both.
	spec = pinned(t, mgmt, New(mgmt, settings, app))
	if _, ok := spec["dependsOn"]; ok {
		t.Errorf("dependsOn = %v after a pin without dependencies, want none", spec["dependsOn"])
	}
	if _, ok := spec["commonMetadata"]; ok {
		t.Errorf("commonMetadata = %v after a pin in Reconcile mode, want none", spec["commonMetadata"])
	}
	if spec["prune"] != true || spec["wait"] != true {
		t.Errorf("prune/wait = %v/%v, want both on", spec["prune"], spec["wait"])
	}
}

// TestPinCarriesHealthChecks checks that verify.health_checks become the Kustomization's
// healthCheckExprs (apiVersion, kind, current and, when given, inProgress and failed), which
// kustomize-controller judges the applied objects by, and that a pin without them removes them.
func TestPinCarriesHealthChecks(t *testing.T) {
	mgmt := fake.NewClientBuilder().Build()
	settings := Settings{Repository: "oci://registry.example/fleet/app"}
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "app"}
	rules := []health.Rule{
		{APIVersion: "v1", Kind: "ConfigMap", Current: "true", Failed: "data.value == 'bad'"},
		{APIVersion: "cert-manager.io/v1", Kind: "Certificate", Current: "status.conditions.exists(e, e.type == 'Ready' && e.status == 'True')",
			InProgress: "status.conditions.exists(e, e.type == 'Issuing' && e.status == 'True')"},
	}

	spec := pinned(t, mgmt, New(mgmt, settings, key).WithKustomize(Kustomize{HealthChecks: rules}))
	want := []any{
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "current": "true", "failed": "data.value == 'bad'"},
		map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "current": rules[1].Current, "inProgress": rules[1].InProgress},
	}
	if !reflect.DeepEqual(spec["healthCheckExprs"], want) {
		t.Errorf("healthCheckExprs = %v, want %v", spec["healthCheckExprs"], want)
	}
	if spec["wait"] != true {
		t.Errorf("wait = %v: kustomize-controller evaluates healthCheckExprs only as it waits", spec["wait"])
	}

	spec = pinned(t, mgmt, New(mgmt, settings, key))
	if _, ok := spec["healthCheckExprs"]; ok {
		t.Errorf("healthCheckExprs = %v after a pin without health checks, want none", spec["healthCheckExprs"])
	}
}
