package delivery

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// fluxWorldOf is the Flux world of a module (base.app, depending on base.crds) on a fake
// management cluster, publishing to a registry served by handler.
func fluxWorldOf(t *testing.T, handler http.Handler) (*world, client.Client) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	mgmt := fake.NewClientBuilder().Build()
	svc := (&Service{engine: directEngine{}, mgmt: &fleet.Management{Client: mgmt}, clock: engine.SystemClock{}, retryWait: time.Millisecond,
		goneReason: func(context.Context, string, string, bool) (string, error) { return "", nil }}).
		WithFlux(&FluxSettings{Repository: "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/gradual/base", Insecure: true})
	set, err := manifest.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata:\n  a: b\n")
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindModule, Namespace: "fleet", Name: "base.app"}
	spec := Spec{Key: key, ClusterNamespace: "fleet", RecordNamespace: "gradual-system", Objects: set, Revision: "r1",
		Policy:    engine.Policy{VerifyTimeout: time.Minute},
		Kustomize: FluxKustomize{DependsOn: []records.Key{{Kind: records.KindModule, Namespace: "fleet", Name: "base.crds"}}}}
	w := &world{svc: svc, spec: spec, logf: func(string, map[string]any) {}}
	w.engine = svc.engine.run(w)
	return w, mgmt
}

func inMemoryRegistry() http.Handler {
	return registry.New(registry.Logger(log.New(io.Discard, "", 0)))
}

// TestFluxRegistryFailingMidApplyIsInfrastructure: the registry takes the artifact's blobs and
// then fails its manifest (it went down mid-push). The cluster's change fails as the
// infrastructure's (retried, then unsettled; never the revision's, which would record it
// invalid for the whole fleet), and no Kustomization is pinned to an artifact that is not there.
func TestFluxRegistryFailingMidApplyIsInfrastructure(t *testing.T) {
	reg := inMemoryRegistry()
	var manifestPuts atomic.Int32
	w, mgmt := fluxWorldOf(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			manifestPuts.Add(1)
			http.Error(rw, "registry going down", http.StatusServiceUnavailable)
			return
		}
		reg.ServeHTTP(rw, r)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := w.Apply(ctx, "c1", "r1")
	switch {
	case err == nil:
		t.Fatal("Apply succeeded with a registry that refuses the artifact's manifest")
	case errors.Is(err, engine.ErrRevisionFailed), errors.Is(err, engine.ErrChangeRefused), errors.Is(err, engine.ErrTargetGone):
		t.Fatalf("Apply = %v: want an infrastructure failure (unmarked), never the revision's", err)
	case !strings.Contains(err.Error(), "publish revision r1"):
		t.Fatalf("Apply = %v: want the publishing named", err)
	}
	if manifestPuts.Load() < 2 {
		t.Errorf("%d manifest pushes: want the failure retried as the infrastructure's", manifestPuts.Load())
	}
	ks := fluxdelivery.New(mgmt, fluxSettingsOf(w.svc), w.spec.Key)
	if st, err := ks.Read(context.Background(), "fleet", "c1"); err != nil || st.Exists {
		t.Fatalf("Kustomization after a failed publish: %+v, %v; want none", st, err)
	}
}

// TestFluxClusterLeaving pins a module to a cluster (its Kustomization waits for the crds
// module's there) and then takes it away as a cluster leaving does: the Kustomization (Flux
// prunes what it applied), the OCIRepository and the records in the management cluster go.
// deletion_policy = "orphan" is refused rather than pruned.
func TestFluxClusterLeaving(t *testing.T) {
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := context.Background()
	if err := w.Apply(ctx, "c1", "r1"); err != nil {
		t.Fatal(err)
	}
	store := w.svc.fluxStore(w.spec.RecordNamespace)
	rkey := FluxRecordKey(w.spec.Key, "c1")
	if err := store.MarkProvisioning(ctx, rkey, records.Revision{Revision: "r1"}); err != nil {
		t.Fatal(err)
	}
	name := fluxdelivery.ObjectName(w.spec.Key, "c1")
	ks := fluxObject(fluxdelivery.KustomizationKind, name)
	if err := mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		t.Fatalf("the pinned Kustomization: %v", err)
	}
	if deps, _, _ := unstructured.NestedSlice(ks.Object, "spec", "dependsOn"); len(deps) != 1 {
		t.Fatal("the pinned Kustomization has no dependsOn")
	}
	if got := rolloutFluxObjects(t, mgmt, w.spec.Key, fluxdelivery.OCIRepositoryKind); len(got) != 1 {
		t.Fatalf("OCIRepositories of the rollout once pinned: %v, want one", got)
	}
	if _, err := w.svc.destroyCluster(ctx, w.spec, "c1", false); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{fluxdelivery.KustomizationKind, fluxdelivery.OCIRepositoryKind} {
		if got := rolloutFluxObjects(t, mgmt, w.spec.Key, gvk); len(got) > 0 {
			t.Errorf("%ss after the cluster left: %v, want them deleted", gvk.Kind, got)
		}
	}
	state, err := store.Load(ctx, rkey)
	if err != nil {
		t.Fatal(err)
	}
	if state.Provisioning != nil || state.Current != nil {
		t.Errorf("records after the cluster left: %+v, want none", state)
	}
}

// fluxObject is the Flux object of kind gvk called name in the Clusters' namespace, to read.
// rolloutFluxObjects names the objects of kind gvk in namespace fleet that carry key's rollout
// label: the Kustomizations of its clusters, and the OCIRepositories they share.
func rolloutFluxObjects(t *testing.T, mgmt client.Client, key records.Key, gvk schema.GroupVersionKind) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := mgmt.List(context.Background(), list, client.InNamespace("fleet"), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
		t.Fatalf("list %ss: %v", gvk.Kind, err)
	}
	var names []string
	for _, o := range list.Items {
		names = append(names, o.GetName())
	}
	return names
}

func fluxObject(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace("fleet")
	u.SetName(name)
	return u
}

// TestFluxVerifyFollowsTheWatch: with the run's watch established, a verification takes the
// Kustomization's status from it (here the watch alone knows it: the management client has no
// Kustomization), and a Kustomization the watch has not seen is read rather than judged gone
// (it may have been created a moment ago), so that "gone" is said only by a read.
func TestFluxVerifyFollowsTheWatch(t *testing.T) {
	w, _ := fluxWorldOf(t, inMemoryRegistry())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	tag, manifests, err := fluxRunOf(w).fluxArtifact(ctx, "c1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := fluxRunOf(w).d.Publish(ctx, tag, manifests)
	if err != nil {
		t.Fatal(err)
	}
	ks := fluxObject(fluxdelivery.KustomizationKind, fluxdelivery.ObjectName(w.spec.Key, "c1"))
	ks.SetLabels(map[string]string{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: w.spec.Key.Hash()})
	ks.SetAnnotations(map[string]string{records.AnnotationRolloutKey: w.spec.Key.String(), "gradual.dev/cluster-name": "c1"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(unstructured.SetNestedField(ks.Object, "latest@"+digest, "status", "lastAppliedRevision"))
	must(unstructured.SetNestedSlice(ks.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded"}}, "status", "conditions"))
	c := fake.NewClientBuilder().WithScheme(fluxdelivery.StatusScheme()).WithObjects(ks).Build()
	fluxRunOf(w).statuses = fluxRunOf(w).d.WatchStatuses(ctx, c, "fleet")
	for {
		if _, _, ok := fluxRunOf(w).statuses.Status("c1"); ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the watch did not list within 5 s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := fluxRunOf(w).verify(ctx, "c1", "r1"); err != nil {
		t.Fatalf("verify of a cluster the watch sees ready on the digest: %v", err)
	}
	err = fluxRunOf(w).verify(ctx, "c2", "r1")
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("verify of a cluster without a Kustomization: %v, want it read and found gone", err)
	}
}
