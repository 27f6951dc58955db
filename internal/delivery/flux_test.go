package delivery

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
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
			direct := &Service{engine: directEngine{}, mgmt: &fleet.Management{}, clock: engine.SystemClock{}, retryWait: time.Millisecond,
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
			w.engine = w.svc.engine.run(w)
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

// TestFluxArtifactIsTheTemplate: the desired revision is one artifact tagged by the revision,
// with values too: the template, which each cluster's Kustomization renders with the cluster's
// variables (postBuild.substitute). Every cluster of the namespace shares its OCIRepository; a
// cluster the plan did not render is refused, never pinned to the template without variables.
func TestFluxArtifactIsTheTemplate(t *testing.T) {
	set := func(value string) *manifest.Set {
		s, err := manifest.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: zone\n  namespace: default\ndata:\n  zone: " + value + "\n")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := context.Background()
	w.spec.Objects, w.spec.Values = set("${zone}"), &Values{}
	w.spec.Rendered = map[string]*manifest.Set{"a": set("eu"), "b": set("us")}
	w.spec.Variables = map[string]map[string]string{"a": {"zone": "eu"}, "b": {"zone": "us"}}
	w.engine = w.svc.engine.run(w)
	r := w.engine.(*fluxRun)
	for _, c := range []string{"a", "b"} {
		tag, manifests, err := r.fluxArtifact(ctx, c, "r1")
		if err != nil || tag != "r1" || !strings.Contains(string(manifests), "zone: ${zone}") {
			t.Fatalf("%s: artifact %q %s (%v), want the template tagged by the revision", c, tag, manifests, err)
		}
		if err := r.fluxPin(ctx, c, "r1"); err != nil {
			t.Fatal(err)
		}
		ks := fluxObject(fluxdelivery.KustomizationKind, fluxdelivery.ObjectName(w.spec.Key, c))
		if err := mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "postBuild", "substitute"); !maps.Equal(got, w.spec.Variables[c]) {
			t.Errorf("%s: postBuild.substitute %v, want %v", c, got, w.spec.Variables[c])
		}
	}
	if got := rolloutFluxObjects(t, mgmt, w.spec.Key, fluxdelivery.OCIRepositoryKind); len(got) != 1 {
		t.Errorf("OCIRepositories of two clusters on one template: %v, want one", got)
	}
	if err := r.fluxPin(ctx, "d", "r1"); err == nil || !strings.Contains(err.Error(), "not rendered for cluster d") {
		t.Fatalf("a cluster that was not rendered: %v, want a refusal naming it", err)
	}
}

// TestFluxObserveStopsWhenTheManagementClusterCannotBeRead: in Flux mode a cluster's Flux objects
// and records are read in the management cluster, so a failure to read them (here RBAC's 403 on
// Kustomizations) is the management cluster's, not the cluster's: the observation fails, naming
// the reason, instead of listing every cluster as skipped ("cannot read the cluster"), which
// would plan a run that changes nothing and says so nowhere but `skipped`. A suspended
// Kustomization is still a skip on purpose.
//
// It also checks how the management cluster is read: by three lists (Kustomizations,
// OCIRepositories, records), whatever the fleet's size, and no GET per cluster; an object that
// carries the rollout's label but is not its object for the cluster it names is not read as
// that cluster's.
func TestFluxObserveStopsWhenTheManagementClusterCannotBeRead(t *testing.T) {
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	var clusters []fleet.Cluster
	for _, name := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		clusters = append(clusters, fleet.Cluster{Namespace: "fleet", Name: name})
	}
	discovery := &fleet.Discovery{Clusters: clusters}
	forbidden := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if list.GetObjectKind().GroupVersionKind().Kind == fluxdelivery.KustomizationKind.Kind+"List" {
			return apierrors.NewForbidden(schema.GroupResource{Group: "kustomize.toolkit.fluxcd.io", Resource: "kustomizations"}, "", errors.New("RBAC: access denied"))
		}
		return c.List(ctx, list, opts...)
	}}
	var gets, lists atomic.Int32 // the lists go out together
	counting := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, k, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists.Add(1)
			return c.List(ctx, list, opts...)
		}}
	labelled := func(name, cluster string) *unstructured.Unstructured {
		u := fluxObject(fluxdelivery.KustomizationKind, name)
		u.SetLabels(map[string]string{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: key.Hash()})
		u.SetAnnotations(map[string]string{records.AnnotationRolloutKey: key.String(), "gradual.dev/cluster-name": cluster})
		if err := unstructured.SetNestedField(u.Object, true, "spec", "suspend"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	suspended := labelled(fluxdelivery.ObjectName(key, "c1"), "c1")
	impostor := labelled("copy-of-c2", "c2") // labelled for c2, suspended, but not c2's Kustomization
	for _, tc := range []struct {
		name    string
		mgmt    client.Client
		wantErr bool
	}{
		{"forbidden", fake.NewClientBuilder().WithInterceptorFuncs(forbidden).Build(), true},
		{"readable, one suspended", fake.NewClientBuilder().WithObjects(suspended, impostor).WithInterceptorFuncs(counting).Build(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := (&Service{engine: directEngine{}, mgmt: &fleet.Management{Client: tc.mgmt}, clock: engine.SystemClock{}, concurrency: 2, retryWait: time.Millisecond,
				discover: func(context.Context, fleet.Query) (*fleet.Discovery, error) { return discovery, nil }}).
				WithFlux(&fluxdelivery.Settings{Repository: "oci://registry.example/fleet/web"})
			gets.Store(0)
			lists.Store(0)
			obs, err := svc.Observe(context.Background(), fleet.Query{Namespace: "fleet"}, key, "gradual-system", true)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(obs.Skipped["c1"], "suspended") || len(obs.Skipped) != 1 {
					t.Fatalf("skipped = %v, want c1 suspended and no other", obs.Skipped)
				}
				// Besides the three lists: the ledger and the progress record (one read each).
				if lists.Load() > 5 || gets.Load() > 2 {
					t.Fatalf("%d lists and %d GETs for 6 clusters, want the Flux objects and records in 3 lists", lists.Load(), gets.Load())
				}
				return
			}
			if err == nil {
				t.Fatalf("observed %v with the management cluster refusing every Kustomization read", obs.Skipped)
			}
			for _, want := range []string{"Management Cluster Not Readable", "for the 6 clusters", "list the Kustomizations", "forbidden"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestFluxBackoff: a verification reads the Kustomization every half second at first, then less
// and less often, never less often than every fluxPollMax.
func TestFluxBackoff(t *testing.T) {
	waits, total := []time.Duration{}, time.Duration(0)
	for d := fluxPoll; total < 5*time.Minute; d = fluxBackoff(d) {
		waits, total = append(waits, d), total+d
	}
	if waits[0] != fluxPoll || waits[1] <= waits[0] || waits[len(waits)-1] != fluxPollMax {
		t.Fatalf("waits %v: want %s first, growing, ending at %s", waits[:8], fluxPoll, fluxPollMax)
	}
	// A five-minute wave reads each cluster's Kustomization about 100 times, not 600.
	if len(waits) > 110 {
		t.Errorf("%d reads in five minutes", len(waits))
	}
}

// TestFluxPlanTakesTheRefreshReads: in Flux mode a plan takes the management cluster's lists its
// refresh made a moment before (sharedReads), once; a plan without a refresh, one after the
// reads aged, or one for other clusters lists again; apply's own reads (neither role) always do.
func TestFluxPlanTakesTheRefreshReads(t *testing.T) {
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	picked := &fleet.Discovery{Clusters: []fleet.Cluster{{Namespace: "fleet", Name: "c1"}, {Namespace: "fleet", Name: "c2"}}}
	var fluxLists atomic.Int32
	var refuse atomic.Bool // the management cluster refuses the lists of OCIRepositories
	counting := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		switch list.GetObjectKind().GroupVersionKind().Kind {
		case fluxdelivery.KustomizationKind.Kind + "List":
			fluxLists.Add(1)
		case fluxdelivery.OCIRepositoryKind.Kind + "List":
			if refuse.Load() {
				return apierrors.NewServiceUnavailable("the management API server is restarting")
			}
		}
		return c.List(ctx, list, opts...)
	}}
	clk := clock.NewFake(time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC))
	svc := (&Service{engine: directEngine{}, mgmt: &fleet.Management{Client: fake.NewClientBuilder().WithInterceptorFuncs(counting).Build()}, clock: clk,
		concurrency: 2, retryWait: time.Millisecond, shared: newSharedReads(),
		discover: func(context.Context, fleet.Query) (*fleet.Discovery, error) { return picked, nil }}).
		WithFlux(&fluxdelivery.Settings{Repository: "oci://registry.example/fleet/web"})
	q := fleet.Query{Namespace: "fleet"}
	observe := func(s *Service) int32 {
		t.Helper()
		before := fluxLists.Load()
		if _, err := s.Observe(context.Background(), q, key, "gradual-system", false); err != nil {
			t.Fatal(err)
		}
		return fluxLists.Load() - before
	}
	for _, step := range []struct {
		name string
		svc  *Service
		want int32 // Kustomization lists made
	}{
		{"refresh", svc.Refreshing(), 1},
		{"its plan takes the refresh's reads", svc.Planning(), 0},
		{"a second plan reads again", svc.Planning(), 1},
		{"apply reads for itself", svc, 1},
		{"refresh again", svc.Refreshing(), 1},
		{"apply does not take the refresh's reads", svc, 1},
		{"the plan still does", svc.Planning(), 0},
	} {
		if got := observe(step.svc); got != step.want {
			t.Fatalf("%s: %d Kustomization lists, want %d", step.name, got, step.want)
		}
	}
	observe(svc.Refreshing())
	clk.Advance(sharedReadsMaxAge + time.Second)
	if got := observe(svc.Planning()); got != 1 {
		t.Fatalf("a plan %s after its refresh made %d Kustomization lists, want 1 (too old to take)", sharedReadsMaxAge+time.Second, got)
	}
	// A refresh whose reads failed keeps nothing: the plan reads, and fails or not on its own.
	refuse.Store(true)
	if _, err := svc.Refreshing().Observe(context.Background(), q, key, "gradual-system", false); err == nil {
		t.Fatal("the refresh observed the fleet with the management cluster refusing its lists")
	}
	refuse.Store(false)
	if got := observe(svc.Planning()); got != 1 {
		t.Fatalf("a plan after a refresh that failed made %d Kustomization lists, want 1", got)
	}
	observe(svc.Refreshing())
	picked = &fleet.Discovery{Clusters: []fleet.Cluster{{Namespace: "fleet", Name: "c1"}}}
	if got := observe(svc.Planning()); got != 1 {
		t.Fatalf("a plan of other clusters than its refresh's made %d Kustomization lists, want 1", got)
	}
}

// TestReadyNowThroughFluxReadsNoWorkload: the plan's read of a joiner's health (ReadyNow, the
// bridge's view) dials the workload cluster when delivering directly, and through Flux dials
// nothing (no kubeconfig Secret read, no connection) and says why.
func TestReadyNowThroughFluxReadsNoWorkload(t *testing.T) {
	for _, tc := range []struct {
		name string
		flux *fluxdelivery.Settings
	}{
		{"direct", nil},
		{"flux", &fluxdelivery.Settings{Repository: "oci://registry.example/fleet/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dialed []string
			direct := &Service{engine: directEngine{}, mgmt: &fleet.Management{}, clock: engine.SystemClock{}, retryWait: time.Millisecond,
				dial: func(_ context.Context, _, name string, _ bool) (*conn, error) {
					dialed = append(dialed, name)
					return nil, errors.New("unreachable")
				}}
			err := direct.WithFlux(tc.flux).ReadyNow(context.Background(), "fleet", "joiner-1", records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}, nil)
			if tc.flux == nil {
				if len(dialed) != 1 || err == nil {
					t.Errorf("direct: dialed %v, err %v; want joiner-1 dialed and its error", dialed, err)
				}
				return
			}
			if len(dialed) != 0 || !errors.Is(err, ErrReadsNoWorkload) {
				t.Errorf("through Flux: dialed %v, err %v; want nothing dialed and ErrReadsNoWorkload", dialed, err)
			}
		})
	}
}
