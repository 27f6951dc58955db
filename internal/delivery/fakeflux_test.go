package delivery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The fake Flux of the engines' simulation (enginesim_test.go): a management cluster (a
// controller-runtime fake client) with the API server's part the fake client lacks (a
// Kustomization's generation moves when its spec changes), and a small kustomize-controller
// that reconciles the rollout's Kustomizations there after a seeded delay, applying to
// workload clusters that exist only as "the digest that runs there". Its faults are Flux's own:
// a revision whose health check fails, a dry-run refused (for the revision's content, or by an
// API server that is unavailable), a controller that stops, a Ready left from the older
// revision at the new generation, a finalizer held on delete; prune on delete is recorded.
// Requests of the code under test fail at random as a flaky API server's do (apiFaults).

// fluxFault is what the fake kustomize-controller does on one cluster.
type fluxFault struct {
	// fail is how the desired revision fails there: "" (it does not), fluxHealthCheck (applied,
	// then its health check fails: the revision's), fluxDryRunInvalid (the workload API server
	// refuses its content at dry-run: the revision's), fluxDryRun503 (the workload API server
	// is unavailable at dry-run: the infrastructure's) or fluxDryRunWebhookDown (a fail-closed
	// admission webhook is not serving, so the API server refuses the dry-run: the
	// infrastructure's).
	fail string
	// stop: the controller stops reconciling this cluster as the desired revision is pinned
	// (before it gives any word on it); stopAfterVerdict: it gives its verdict on the desired
	// revision, then stops (the restore is never reconciled).
	stop, stopAfterVerdict bool
	// staleReady: a pin that changes the Kustomization's spec (its generation moves) leaves the
	// Ready condition of the revision applied before at the new generation (Ready True,
	// lastAppliedRevision the older digest) until the reconcile. A re-pin that changes only the
	// OCIRepository's digest leaves it so in any case, as Flux does: the generation stays.
	staleReady bool
	// holdFinalizer: on delete, the controller holds its finalizer this long before it prunes.
	holdFinalizer time.Duration
}

const (
	fluxHealthCheck   = "HealthCheckFailed"
	fluxDryRunInvalid = "dry-run Invalid"
	fluxDryRun503     = "dry-run ServiceUnavailable"
	// fluxDryRunWebhookDown is worded as kustomize-controller words what errWebhookDown says.
	fluxDryRunWebhookDown = "dry-run InternalError (webhook down)"
	fluxFinalizer         = "finalizers.fluxcd.io"
)

// fluxCluster is one workload cluster as the fake kustomize-controller sees it.
type fluxCluster struct {
	name  string
	fault fluxFault
	rng   *rand.Rand
	// applied is the digest whose objects run on the cluster ("": none).
	applied string
	// pruned lists the digests pruned from the cluster when its Kustomization was deleted.
	pruned []string
	// history is every digest applied there, in order ("" when pruned).
	history []string
	// handled is the generation reconciled last, source the digest its OCIRepository pinned then;
	// due when the pending reconcile (or prune) runs.
	handled   int64
	source    string
	due       time.Time
	deleteDue time.Time
	stopped   bool
}

// fakeKustomizeController is the fake management cluster's kustomize-controller (and the part
// of its API server the fake client lacks).
type fakeKustomizeController struct {
	t    testing.TB
	key  records.Key
	ns   string
	base client.WithWatch // the management cluster as the controller and the test see it
	api  client.WithWatch // as the code under test sees it: generations, injected faults
	// revisionOf names the revision of each digest the engine may pin.
	revisionOf map[string]string
	// changed is told of every write of the code under test to a cluster's Flux objects.
	changed func(cluster, what string)
	// stopAt stops the whole controller at that moment (zero: never).
	stopAt time.Time

	mu        sync.Mutex
	clusters  map[string]*fluxCluster
	byName    map[string]string // Flux object name → cluster
	reconcile time.Duration     // the controller's tick
	outOfWave []string          // applies to a cluster no wave had reached (see applied)
	mayApply  func(cluster string) bool
}

// newFakeFlux is the fake Flux of key's clusters in namespace ns, with the clients' faults.
func newFakeFlux(t testing.TB, key records.Key, ns string, faults *apiFaults) *fakeKustomizeController {
	// A scheme of its own: the fake client adds the Flux kinds to it, and the default one is
	// shared by every fake client of the package.
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fakeKustomizeController{t: t, key: key, ns: ns, base: fake.NewClientBuilder().WithScheme(scheme).Build(),
		revisionOf: map[string]string{}, clusters: map[string]*fluxCluster{}, byName: map[string]string{},
		reconcile: 100 * time.Millisecond, changed: func(string, string) {}}
	funcs := faults.funcs()
	apply := funcs.Apply
	funcs.Apply = func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
		return f.apply(ctx, obj, func() error { return apply(ctx, c, obj, opts...) })
	}
	del := funcs.Delete
	funcs.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if cluster, ok := f.clusterOf(obj.GetName()); ok {
			f.changed(cluster, "delete "+obj.GetObjectKind().GroupVersionKind().Kind)
		}
		return del(ctx, c, obj, opts...)
	}
	f.api = interceptor.NewClient(f.base, funcs)
	return f
}

// addCluster adds a workload cluster, running digest ("": nothing of the rollout) pinned by
// an earlier run whose Kustomization is Ready on it.
func (f *fakeKustomizeController) addCluster(name, digest string, fault fluxFault, seed uint64) {
	f.mu.Lock()
	fc := &fluxCluster{name: name, fault: fault, rng: rand.New(rand.NewPCG(seed, 0xf1))}
	f.clusters[name] = fc
	f.byName[fluxdelivery.ObjectName(f.key, name)] = name
	f.mu.Unlock()
	if digest == "" {
		return
	}
	ctx := context.Background()
	d := fluxdelivery.New(f.base, fluxdelivery.Settings{Repository: "oci://registry.invalid/gradual/web"}, f.key)
	if _, err := d.Pin(ctx, f.ns, name, fluxdelivery.Pinning{Digest: digest, Timeout: time.Minute}); err != nil {
		f.t.Fatal(err)
	}
	ks := f.kustomization(name)
	if err := f.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		f.t.Fatal(err)
	}
	ks.SetGeneration(1)
	ks.SetFinalizers([]string{fluxFinalizer})
	if err := f.base.Update(ctx, ks); err != nil {
		f.t.Fatal(err)
	}
	fc.applied, fc.handled, fc.source = digest, 1, digest
	f.setStatus(ks, 1, "True", "ReconciliationSucceeded", "Applied revision: "+f.revisionName(digest), digest, digest)
	if err := f.base.Update(ctx, ks); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeKustomizeController) kustomization(cluster string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fluxdelivery.KustomizationKind)
	u.SetNamespace(f.ns)
	u.SetName(fluxdelivery.ObjectName(f.key, cluster))
	return u
}

func (f *fakeKustomizeController) clusterOf(objectName string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.byName[objectName]
	return c, ok
}

// revisionName is what Flux writes as a revision: "<tag>@<digest>"; the test's name for the
// digest stands for the tag.
func (f *fakeKustomizeController) revisionName(digest string) string {
	return f.revisionOf[digest] + "@" + digest
}

// apply is the API server's part of a server-side apply of the code under test: a
// Kustomization's generation moves when its spec changes (the fake client leaves it), and a
// stale Ready is left at the new generation when the cluster's fault says so.
func (f *fakeKustomizeController) apply(ctx context.Context, obj runtime.ApplyConfiguration, do func() error) error {
	probe := appliedObject(obj)
	name, kind := probe.GetName(), probe.GetKind()
	cluster, known := f.clusterOf(name)
	if known {
		f.changed(cluster, "apply "+kind)
	}
	if !known || kind != fluxdelivery.KustomizationKind.Kind {
		return do()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ks := f.kustomization(cluster)
	before := f.kustomization(cluster)
	exists := true
	if err := f.base.Get(ctx, client.ObjectKeyFromObject(before), before); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return err
	}
	if err := do(); err != nil {
		return err
	}
	if err := f.base.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		f.t.Errorf("%s: the Kustomization applied cannot be read: %v", cluster, err)
		return nil
	}
	if exists && reflect.DeepEqual(before.Object["spec"], ks.Object["spec"]) {
		return nil
	}
	gen := before.GetGeneration() + 1
	if !exists {
		gen = 1
	}
	ks.SetGeneration(gen)
	if fc := f.clusters[cluster]; fc.fault.staleReady && exists {
		// The Ready of the revision applied before, at the new generation: only
		// lastAppliedRevision tells it is not the pinned digest's.
		conds, _, _ := unstructured.NestedSlice(ks.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				m["observedGeneration"] = gen
			}
		}
		_ = unstructured.SetNestedSlice(ks.Object, conds, "status", "conditions")
	}
	if err := f.base.Update(ctx, ks); err != nil {
		f.t.Errorf("%s: the Kustomization's generation not set: %v", cluster, err)
	}
	return nil
}

// setStatus writes ks's status (in memory: the caller updates).
func (f *fakeKustomizeController) setStatus(ks *unstructured.Unstructured, gen int64, ready, reason, message, attempted, applied string) {
	cond := map[string]any{"type": "Ready", "status": ready, "reason": reason, "message": message,
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	status := map[string]any{"observedGeneration": gen, "conditions": []any{cond}}
	if attempted != "" {
		status["lastAttemptedRevision"] = f.revisionName(attempted)
	}
	if applied != "" {
		status["lastAppliedRevision"] = f.revisionName(applied)
	}
	ks.Object["status"] = status
}

// run reconciles until ctx ends, every tick of the (virtual) clock.
func (f *fakeKustomizeController) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.reconcile):
		}
		f.reconcileAll(ctx)
	}
}

// reconcileAll is one pass of the controller over the rollout's Kustomizations.
func (f *fakeKustomizeController) reconcileAll(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if !f.stopAt.IsZero() && !now.Before(f.stopAt) {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(fluxdelivery.KustomizationKind.GroupVersion().WithKind("KustomizationList"))
	if err := f.base.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		f.t.Errorf("the fake controller's list: %v", err)
		return
	}
	for i := range list.Items {
		ks := &list.Items[i]
		fc := f.clusters[f.byName[ks.GetName()]]
		if fc == nil || fc.stopped {
			continue
		}
		if ks.GetDeletionTimestamp() != nil {
			f.finalize(ctx, fc, ks, now)
			continue
		}
		// A new generation of the Kustomization, or a new artifact of its source (a re-pin changes
		// the OCIRepository only: kustomize-controller reconciles on the source's revision).
		if gen := ks.GetGeneration(); gen > fc.handled || f.sourceOf(ctx, fc, ks) != fc.source {
			if fc.due.IsZero() {
				fc.due = now.Add(time.Duration(200+fc.rng.IntN(2800)) * time.Millisecond)
			}
			if now.Before(fc.due) {
				continue
			}
			fc.due = time.Time{}
			f.reconcileOne(ctx, fc, ks, gen)
		}
	}
}

// finalize prunes what a deleted Kustomization applied and lets it go, once the finalizer's
// hold is over.
func (f *fakeKustomizeController) finalize(ctx context.Context, fc *fluxCluster, ks *unstructured.Unstructured, now time.Time) {
	if fc.deleteDue.IsZero() {
		fc.deleteDue = now.Add(fc.fault.holdFinalizer)
	}
	if now.Before(fc.deleteDue) {
		return
	}
	fc.deleteDue = time.Time{}
	// Flux prunes as it finalizes unless spec.prune is off (turned off to let go without
	// pruning): then what it applied stays.
	if prune, set, _ := unstructured.NestedBool(ks.Object, "spec", "prune"); fc.applied != "" && (!set || prune) {
		fc.pruned = append(fc.pruned, fc.applied)
		f.setApplied(fc, "")
	}
	ks.SetFinalizers(slices.DeleteFunc(ks.GetFinalizers(), func(s string) bool { return s == fluxFinalizer }))
	if err := f.base.Update(ctx, ks); err != nil {
		f.t.Errorf("%s: the finalizer not removed: %v", fc.name, err)
	}
	fc.handled, fc.source = 0, ""
}

// sourceOf is the digest ks's OCIRepository is pinned to ("" when it has none).
func (f *fakeKustomizeController) sourceOf(ctx context.Context, fc *fluxCluster, ks *unstructured.Unstructured) string {
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(fluxdelivery.OCIRepositoryKind)
	src.SetNamespace(f.ns)
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	src.SetName(name)
	if err := f.base.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		if !apierrors.IsNotFound(err) {
			f.t.Errorf("%s: the Kustomization's OCIRepository: %v", fc.name, err)
		}
		return ""
	}
	digest, _, _ := unstructured.NestedString(src.Object, "spec", "ref", "digest")
	return digest
}

// reconcileOne reconciles generation gen of fc's Kustomization: fetches the pinned digest,
// dry-runs, applies and checks health, as the cluster's fault says.
func (f *fakeKustomizeController) reconcileOne(ctx context.Context, fc *fluxCluster, ks *unstructured.Unstructured, gen int64) {
	digest := f.sourceOf(ctx, fc, ks)
	rev := f.revisionOf[digest]
	if rev == "" {
		f.t.Errorf("%s: pinned to %s, no artifact the test knows", fc.name, digest)
	}
	if rev == simDesired && fc.fault.stop {
		fc.stopped = true // not a word on it, ever
		return
	}
	ks.SetFinalizers(append(slices.DeleteFunc(ks.GetFinalizers(), func(s string) bool { return s == fluxFinalizer }), fluxFinalizer))
	lastApplied, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
	prevApplied := ""
	if _, d, ok := cutLast(lastApplied, "@"); ok {
		prevApplied = d
	}
	fail := ""
	if rev == simDesired {
		fail = fc.fault.fail
	}
	switch fail {
	case fluxHealthCheck:
		// Applied, then not healthy in time: lastAppliedRevision stays the older one.
		f.setApplied(fc, digest)
		f.setStatus(ks, gen, "False", "HealthCheckFailed",
			"health check failed after 4m0s: timeout waiting for: [Deployment/demo/web status: 'InProgress']", digest, prevApplied)
	case fluxDryRunInvalid:
		f.setStatus(ks, gen, "False", "ReconciliationFailed",
			`Deployment/demo/web dry-run failed (Invalid): Deployment.apps "web" is invalid: spec.template.spec.containers[0].image: Required value`,
			digest, prevApplied)
	case fluxDryRun503:
		f.setStatus(ks, gen, "False", "ReconciliationFailed",
			"Deployment/demo/web dry-run failed (ServiceUnavailable): the server is currently unable to handle the request", digest, prevApplied)
	case fluxDryRunWebhookDown:
		f.setStatus(ks, gen, "False", "ReconciliationFailed",
			"Deployment/demo/web dry-run failed (InternalError): Internal error occurred: "+errWebhookDown.ErrStatus.Message, digest, prevApplied)
	default:
		f.setApplied(fc, digest)
		f.setStatus(ks, gen, "True", "ReconciliationSucceeded", "Applied revision: "+f.revisionName(digest), digest, digest)
	}
	if err := f.base.Update(ctx, ks); err != nil {
		f.t.Errorf("%s: status not written: %v", fc.name, err)
	}
	fc.handled, fc.source = gen, digest
	if fail != "" && fc.fault.stopAfterVerdict {
		fc.stopped = true
	}
}

// setApplied records what runs on fc's workload cluster now.
func (f *fakeKustomizeController) setApplied(fc *fluxCluster, digest string) {
	if digest == fc.applied {
		return
	}
	if f.mayApply != nil && !f.mayApply(fc.name) {
		f.outOfWave = append(f.outOfWave, fmt.Sprintf("%s: %s applied", fc.name, f.revisionOf[digest]))
	}
	fc.applied = digest
	fc.history = append(fc.history, f.revisionOf[digest])
}

// truth is what runs on cluster: "" (nothing of the rollout), or the revision's name.
func (f *fakeKustomizeController) truth(cluster string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	fc := f.clusters[cluster]
	if fc.applied == "" {
		return ""
	}
	if rev := f.revisionOf[fc.applied]; rev != "" {
		return rev
	}
	return "?" + fc.applied
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := bytes.LastIndex([]byte(s), []byte(sep))
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// fluxDigests names the digests the engine may pin for the fixtures: the desired revision's
// artifact, and the older revision's, as an earlier run pinned it (tagged with the revision) and
// as a restore from the cluster's records publishes it (tagged revision-<content hash>).
func fluxDigests(t testing.TB, old, desired revisionFixture) (oldPinned string, names map[string]string) {
	t.Helper()
	names = map[string]string{}
	digest := func(tag string, objs []*unstructured.Unstructured) string {
		m, err := fluxdelivery.Manifests(objs)
		if err != nil {
			t.Fatal(err)
		}
		if tag == "" {
			sum := sha256.Sum256(m)
			tag = old.revision + "-" + hex.EncodeToString(sum[:])[:12]
		}
		d, err := fluxdelivery.ArtifactDigest(tag, m)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	oldPinned = digest(old.revision, old.set.Objects)
	names[oldPinned] = simOld
	restored, err := manifest.FromCanonical(old.canonical)
	if err != nil {
		t.Fatal(err)
	}
	names[digest("", restored.Objects)] = simOld
	names[digest(desired.revision, desired.set.Objects)] = simDesired
	return oldPinned, names
}

// apiFaults make a fraction of the requests of the code under test fail as a flaky API server's
// do (503, 429): deterministic for a seed, by a hash of the request and how many of its kind
// were made before.
type apiFaults struct {
	seed uint64
	p    float64
	// armed: the faults are injected (from the run's start: the plan before it reads whole).
	armed atomic.Bool

	mu    sync.Mutex
	calls map[string]uint64
	count int
}

func (a *apiFaults) fail(op string, obj any, name string) error {
	if a == nil || a.p == 0 || !a.armed.Load() {
		return nil
	}
	kind := fmt.Sprintf("%T", obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		kind = u.GetKind()
	}
	key := op + " " + kind + " " + name
	a.mu.Lock()
	n := a.calls[key]
	if a.calls == nil {
		a.calls = map[string]uint64{}
	}
	a.calls[key] = n + 1
	a.mu.Unlock()
	h := sha256.New()
	_ = binary.Write(h, binary.LittleEndian, a.seed)
	_ = binary.Write(h, binary.LittleEndian, n)
	h.Write([]byte(key))
	sum := h.Sum(nil)
	if float64(binary.LittleEndian.Uint32(sum))/float64(1<<32) >= a.p {
		return nil
	}
	a.mu.Lock()
	a.count++
	a.mu.Unlock()
	if sum[4]%2 == 0 {
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
	}
	return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
}

func (a *apiFaults) injected() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// funcs are interceptor funcs that inject the faults into every request.
func (a *apiFaults) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := a.fail("get", obj, key.Name); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := a.fail("list", list, ""); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := a.fail("create", obj, obj.GetName()); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := a.fail("update", obj, obj.GetName()); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := a.fail("patch", obj, obj.GetName()); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := a.fail("delete", obj, obj.GetName()); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if err := a.fail("apply", appliedObject(obj), appliedObject(obj).GetName()); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
	}
}

// registryTransport serves the registries of the simulation in memory: no socket, so that a
// push runs inside a synctest bubble. Other hosts go to the transport it replaced.
type registryTransport struct {
	fallback http.RoundTripper
	mu       sync.Mutex
	hosts    map[string]http.Handler
}

func (rt *registryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	h := rt.hosts[r.URL.Host]
	rt.mu.Unlock()
	if h == nil {
		return rt.fallback.RoundTrip(r)
	}
	in := r.Clone(r.Context())
	in.Body = http.NoBody // a server's request always has a body
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		in.Body = io.NopCloser(bytes.NewReader(body))
	}
	in.RequestURI = r.URL.RequestURI()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// serve makes host answer from h.
func (rt *registryTransport) serve(host string, h http.Handler) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.hosts[host] = h
}

// inMemoryRegistries replaces go-containerregistry's default transport for the test (which must
// not run in parallel with others that push: the transport is a package variable).
func inMemoryRegistries(t *testing.T) *registryTransport {
	rt := &registryTransport{fallback: remote.DefaultTransport, hosts: map[string]http.Handler{}}
	remote.DefaultTransport = rt
	t.Cleanup(func() { remote.DefaultTransport = rt.fallback })
	return rt
}

// appliedObject is what a server-side apply configuration names (its kind and name), as the
// fake client reads it: its JSON.
func appliedObject(obj runtime.ApplyConfiguration) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if data, err := json.Marshal(obj); err == nil {
		_ = json.Unmarshal(data, &u.Object)
	}
	return u
}
