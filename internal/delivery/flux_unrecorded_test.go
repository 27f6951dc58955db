package delivery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestFluxRecordsMissingAreUnknown: through Flux a cluster's records live in the management
// cluster; with them deleted there (c1) while the rollout's Kustomization still applies a
// revision to c1, c1 is records-missing, naming what the Kustomization applied, and is held
// back, as delivering directly with a workload cluster's record namespace deleted. Read as
// pending (as it was), it would take the next revision, and a failure there would be restored to
// nothing: its Kustomization deleted, and Flux prunes what ran before
// (TestAccRollout_fluxContract_recordsMissingAreUnknown). c2, with neither records nor a
// Kustomization, is pending.
func TestFluxRecordsMissingAreUnknown(t *testing.T) {
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	ks := fluxObject(fluxdelivery.KustomizationKind, fluxdelivery.ObjectName(key, "c1"))
	ks.SetLabels(map[string]string{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: key.Hash()})
	ks.SetAnnotations(map[string]string{records.AnnotationRolloutKey: key.String(), "gradual.dev/cluster-name": "c1"})
	if err := unstructured.SetNestedSlice(ks.Object, []any{
		map[string]any{"id": "_web__Namespace", "v": "v1"},
		map[string]any{"id": "web_settings__ConfigMap", "v": "v1"},
		map[string]any{"id": "web_web_apps_Deployment", "v": "v1"},
	}, "status", "inventory", "entries"); err != nil {
		t.Fatal(err)
	}
	discovery := &fleet.Discovery{Clusters: []fleet.Cluster{{Namespace: "fleet", Name: "c1"}, {Namespace: "fleet", Name: "c2"}}}
	svc := (&Service{engine: directEngine{}, mgmt: &fleet.Management{Client: fake.NewClientBuilder().WithObjects(ks).Build()},
		clock: engine.SystemClock{}, concurrency: 2, retryWait: time.Millisecond,
		discover: func(context.Context, fleet.Query) (*fleet.Discovery, error) { return discovery, nil }}).
		WithFlux(&fluxdelivery.Settings{Repository: "oci://registry.example/fleet/web"})
	for _, drift := range []bool{false, true} { // a refresh, and a plan or an apply
		obs, err := svc.Observe(context.Background(), fleet.Query{Namespace: "fleet"}, key, "gradual-system", drift)
		if err != nil {
			t.Fatal(err)
		}
		c1, c2 := obs.Clusters["c1"], obs.Clusters["c2"]
		want := []string{"ConfigMap web/settings", "Deployment web/web", "Namespace web"}
		if c1.State != StateRecordsMissing || !slices.Equal(c1.Drift, want) {
			t.Errorf("drift %v: c1 %s %v, want %s %v", drift, c1.State, c1.Drift, StateRecordsMissing, want)
		}
		if c2.State != StatePending {
			t.Errorf("drift %v: c2 %s, want %s", drift, c2.State, StatePending)
		}
		held := HoldUnrecorded(obs.Targets, obs.Clusters, false)
		for _, tg := range held {
			if got := strings.HasPrefix(tg.SkipReason, "records missing"); got != (tg.Name == "c1") {
				t.Errorf("drift %v: %s held back %q", drift, tg.Name, tg.SkipReason)
			}
		}
		for _, tg := range HoldUnrecorded(obs.Targets, obs.Clusters, true) {
			if tg.SkipReason != "" {
				t.Errorf("drift %v: with adopt, %s held back %q", drift, tg.Name, tg.SkipReason)
			}
		}
	}
}
