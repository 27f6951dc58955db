package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The fake fleet: workload clusters whose records live in a controller-runtime fake client and
// whose objects live in memory behind a fake objectApplier, both injecting faults. The applier
// checks, on every change it is asked to make, that the change was recorded first.

// The two revisions of the fixtures: desired drops ConfigMap legacy, adds ConfigMap extra and
// changes the other two objects.
const (
	oldManifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: demo}
data: {color: blue}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "registry.example.com/web:1"}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: legacy, namespace: demo}
data: {old: "true"}
`
	desiredManifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: demo}
data: {color: green}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "registry.example.com/web:2"}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: extra, namespace: demo}
data: {new: "true"}
`
)

// revisionFixture is one revision of the rollout's manifests.
type revisionFixture struct {
	set       *manifest.Set
	revision  string
	canonical []byte
	// content maps each object's key to its JSON.
	content map[string]string
}

func newFixture(t testing.TB, text string) revisionFixture {
	t.Helper()
	set, err := manifest.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := set.Revision()
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := set.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	f := revisionFixture{set: set, revision: rev, canonical: canonical, content: map[string]string{}}
	for _, obj := range set.Objects {
		f.content[objKey(obj)] = objJSON(obj)
	}
	return f
}

// record is the fixture as a workload record.
func (f revisionFixture) record() records.Revision {
	return records.Revision{Revision: f.revision, Manifests: f.canonical, Inventory: inventoryOf(f.set.Objects)}
}

// matches reports whether objs are exactly the fixture's objects.
func (f revisionFixture) matches(objs []*unstructured.Unstructured) bool {
	if len(objs) != len(f.content) {
		return false
	}
	for _, obj := range objs {
		if f.content[objKey(obj)] != objJSON(obj) {
			return false
		}
	}
	return true
}

// objKey names an object regardless of its API version, as inventories do.
func objKey(obj *unstructured.Unstructured) string { return refKey(apply.RefOf(obj)) }

func refKey(r apply.ObjectRef) string {
	return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

func objJSON(obj *unstructured.Unstructured) string {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// faults are what goes wrong on one fake cluster.
type faults struct {
	// neverReady: the desired revision's Deployment never becomes ready (a revision failure).
	neverReady bool
	// unreachableVerify: the workload API stops answering while the desired revision is
	// verified; the wait ends at the deadline with every object unreadable.
	unreachableVerify bool
	// goneAtApply: the cluster is torn down and its kubeconfig Secret deleted when the desired
	// revision is applied to it.
	goneAtApply bool
	// goneAtWave: the same, as the wave holding the cluster starts.
	goneAtWave bool
	// throttle: the first throttle writes of records answer 429.
	throttle int
	// recordsDown: every write of records answers 503.
	recordsDown bool
	// applyErr refuses every apply of the desired revision.
	applyErr error
	// restoreBroken: applying or deleting objects for a restore answers 503.
	restoreBroken bool
	// previewSlow: the dry-run of a preview hangs until its context ends (an API server too
	// slow for the plan's time budget); previewDown: it answers 503.
	previewSlow, previewDown bool
	// previewRejects: the dry-run rejects the desired revision's Deployment with this reason
	// (an admission policy); previewConflict: it finds a field of ConfigMap web-config owned by
	// another applier.
	previewRejects  string
	previewConflict bool
	// sickBefore: the cluster's gates are bad before its wave (a Node NotReady): held back.
	sickBefore bool
	// sickAfter: its gates go bad while the desired revision runs on it (a Node NotReady after
	// the change): a revision failure, when the gates could be read before the change.
	sickAfter bool
	// gateUnread: its gates cannot be read (Nodes not listable): it is not gated at all.
	gateUnread bool
	// churnAfter: its Nodes change while the desired revision runs on it, the way an autoscaler
	// and spot interruptions change them (joined, lost, deleted): not the revision's failure.
	churnAfter bool
}

// counted reports whether the faults make the revision fail in a way that counts against the
// budget; invalid whether they also make it recorded invalid.
func (f faults) counted() bool { return f.invalid() || isConflict(f.applyErr) }
func (f faults) invalid() bool {
	return f.neverReady || (f.applyErr != nil && revisionClass(f.applyErr) != nil && !isConflict(f.applyErr)) ||
		(f.sickAfter && !f.gateUnread && !f.sickBefore)
}
func (f faults) gone() bool { return f.goneAtApply || f.goneAtWave }

func isConflict(err error) bool {
	var c *apply.ConflictError
	return errors.As(err, &c)
}

// errRefused is what a client of a torn-down cluster gets.
func errRefused(name string) error {
	return &url.Error{Op: "Get", URL: "https://" + name + ".example.com:6443/api", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused"),
	}}
}

// recordsScheme holds what the records of a workload cluster use (Secrets, Namespaces): a small
// scheme keeps building fake clients cheap.
var recordsScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
})

// newFakeClient is a fake client over recordsScheme with a plain object tracker: the default
// one manages fields, which the records do not need and which costs most of a run's time.
func newFakeClient(objs ...client.Object) client.WithWatch {
	scheme := recordsScheme()
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	return fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(objs...).Build()
}

// liveObject is an object on a fake cluster.
type liveObject struct {
	obj   *unstructured.Unstructured
	ready bool
	// foreign are its field managers other than ours (it was made by kubectl, or another
	// rollout applied it); ours says whether our field manager (the rollout's) is on it too.
	foreign []string
	ours    bool
}

// fakeCluster is one workload cluster: its records (a fake client, intercepted to inject
// faults) and its objects (in memory, behind the objectApplier methods).
type fakeCluster struct {
	env  *env
	name string
	base client.WithWatch // the records, without faults: what the test itself reads
	rec  client.WithWatch // the records as the code under test reaches them

	mu           sync.Mutex
	faults       faults
	gone         bool
	goneRecords  string // the records when the cluster went
	afterGone    []string
	throttled    int
	existing     int // calls of Existing: each reads every object it is given
	live         map[string]liveObject
	created      []string
	deleted      []string
	seeded       []*unstructured.Unstructured // made by someone else before the run (seedForeign)
	destroying   bool                         // deletes come from a destroy: no change is in flight
	released     []string                     // objects given back (Release, Revert)
	orphaned     []string                     // objects left to the legacy field manager (Orphan)
	reverted     []string                     // objects put back to saved content (Revert)
	desiredApply int                          // successful applies of the desired revision
	runsDesired  bool                         // the desired revision was applied last (gate faults)
	restoreOps   int                          // successful applies or deletes made to restore
	unrecorded   bool                         // starts with the old revision's objects but no records
}

var _ objectApplier = (*fakeCluster)(nil)

func newFakeCluster(e *env, name string, f faults) *fakeCluster {
	c := &fakeCluster{env: e, name: name, faults: f, live: map[string]liveObject{}}
	c.base = newFakeClient()
	c.rec = interceptor.NewClient(c.base, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.recordCall("get", false); err != nil {
				return err
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.recordCall("list", false); err != nil {
				return err
			}
			return cl.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.recordCall("create", true); err != nil {
				return err
			}
			return cl.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := c.recordCall("update", true); err != nil {
				return err
			}
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.recordCall("patch", true); err != nil {
				return err
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := c.recordCall("delete", true); err != nil {
				return err
			}
			return cl.Delete(ctx, obj, opts...)
		},
	})
	return c
}

// recordCall injects the records faults into one request.
func (c *fakeCluster) recordCall(op string, write bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.gone:
		c.afterGone = append(c.afterGone, "records "+op)
		return errRefused(c.name)
	case write && c.faults.recordsDown:
		return apierrors.NewServiceUnavailable("etcdserver: leader changed")
	case write && c.throttled < c.faults.throttle:
		c.throttled++
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
	}
	return nil
}

// vanishLocked tears the cluster down: its kubeconfig Secret is deleted, its API refuses
// connections. The records as they were are kept to check that nothing touches them since.
func (c *fakeCluster) vanishLocked() {
	if c.gone {
		return
	}
	c.gone = true
	c.goneRecords = c.env.describeRecords(c)
}

func (c *fakeCluster) vanish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vanishLocked()
}

// enter starts an applier call: a torn-down cluster refuses it.
func (c *fakeCluster) enter(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		c.afterGone = append(c.afterGone, "applier "+op)
		return errRefused(c.name)
	}
	return nil
}

// checkRecorded is the invariant "every change is recorded before it is made": the cluster's
// records show a change in flight (a provisioning record: applying, or rolling back), and every
// object about to be applied is in the inventory of a record, so that a later run can prune it.
func (c *fakeCluster) checkRecorded(op string, objs []*unstructured.Unstructured) {
	t := c.env.t
	st, err := records.NewWorkloadStore(c.base, c.env.spec.RecordNamespace).Load(context.Background(), c.env.spec.Key)
	if err != nil {
		t.Errorf("%s: %s: read records: %v", c.name, op, err)
		return
	}
	if st.Provisioning == nil && !c.destroying {
		t.Errorf("%s: %s while no record shows a change in flight (records: %s): a change made before it was recorded",
			c.name, op, describeState(st))
	}
	inv := map[string]bool{}
	for _, r := range allRecords(st) {
		for _, ref := range r.Inventory {
			inv[refKey(ref)] = true
		}
	}
	for _, obj := range objs {
		if !inv[objKey(obj)] {
			t.Errorf("%s: %s of %s, which no record's inventory holds", c.name, op, objKey(obj))
		}
	}
}

func (c *fakeCluster) Check(_ context.Context, _ []*unstructured.Unstructured) error {
	return c.enter("check")
}

// Preview dry-runs objs: created, changed or unchanged by what the fake cluster holds, with
// the preview faults injected.
func (c *fakeCluster) Preview(ctx context.Context, objs []*unstructured.Unstructured) (*apply.PreviewResult, error) {
	if err := c.enter("preview"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	f := c.faults
	c.mu.Unlock()
	switch {
	case f.previewSlow:
		<-ctx.Done()
		return nil, &apply.ObjectError{Object: apply.RefOf(objs[0]), Op: "dry-run apply", Err: ctx.Err()}
	case f.previewDown:
		return nil, &apply.ObjectError{Object: apply.RefOf(objs[0]), Op: "dry-run apply", Err: apierrors.NewServiceUnavailable("etcdserver: request timed out")}
	}
	res := &apply.PreviewResult{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, obj := range objs {
		ref := apply.RefOf(obj)
		live, ok := c.live[objKey(obj)]
		switch {
		case f.previewRejects != "" && obj.GetKind() == "Deployment":
			res.Counts.Rejected++
			res.Rejected = append(res.Rejected, apply.Rejection{Object: ref, Reason: f.previewRejects})
		case f.previewConflict && obj.GetName() == "web-config":
			res.Counts.Conflicting++
			res.Conflicts = append(res.Conflicts, &apply.ConflictError{Object: ref,
				Conflicts: []apply.FieldConflict{{Manager: "helm", Field: ".data.color", Applied: true}}})
		case !ok:
			res.Counts.Created++
		case objJSON(live.obj) != objJSON(obj):
			res.Counts.Changed++
		default:
			res.Counts.Unchanged++
		}
	}
	return res, nil
}

func (c *fakeCluster) Apply(_ context.Context, objs []*unstructured.Unstructured) (*apply.Result, error) {
	desired := c.env.desired.matches(objs)
	c.mu.Lock()
	if c.gone {
		c.afterGone = append(c.afterGone, "applier apply")
		c.mu.Unlock()
		return nil, errRefused(c.name)
	}
	if desired && c.faults.goneAtApply {
		c.vanishLocked()
		c.mu.Unlock()
		return nil, errRefused(c.name)
	}
	c.mu.Unlock()
	c.checkRecorded("apply", objs)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case desired && c.faults.applyErr != nil:
		return nil, &apply.ObjectError{Object: apply.RefOf(objs[0]), Op: "apply", Err: c.faults.applyErr}
	case !desired && c.faults.restoreBroken:
		return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
	res := &apply.Result{}
	for _, obj := range objs {
		k := objKey(obj)
		action := apply.Configured
		if _, ok := c.live[k]; !ok {
			c.created = append(c.created, k)
			action = apply.Created
		}
		ready := !desired || !c.faults.neverReady || obj.GetKind() != "Deployment"
		c.live[k] = liveObject{obj: obj.DeepCopy(), ready: ready, foreign: c.live[k].foreign, ours: true}
		res.Changes = append(res.Changes, apply.Change{Object: apply.RefOf(obj), Action: action})
	}
	c.runsDesired = desired
	if desired {
		c.desiredApply++
	} else {
		c.restoreOps++
	}
	return res, nil
}

func (c *fakeCluster) Prune(_ context.Context, previous apply.Inventory, objs []*unstructured.Unstructured) (*apply.DeleteResult, error) {
	if err := c.enter("prune"); err != nil {
		return nil, err
	}
	c.checkRecorded("prune", nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLocked(apply.Diff(previous, apply.InventoryOf(objs))), nil
}

func (c *fakeCluster) Delete(_ context.Context, inv apply.Inventory) (*apply.DeleteResult, error) {
	if err := c.enter("delete"); err != nil {
		return nil, err
	}
	c.checkRecorded("delete", nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faults.restoreBroken {
		return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
	c.restoreOps++
	return c.deleteLocked(inv), nil
}

// deleteLocked deletes as apply.Applier.Delete does: an object that other field managers
// manage and ours does not is kept; one we manage too is deleted, whoever made it.
func (c *fakeCluster) deleteLocked(inv apply.Inventory) *apply.DeleteResult {
	res := &apply.DeleteResult{}
	for _, ref := range inv {
		k := refKey(ref)
		if l, ok := c.live[k]; ok && !l.ours && len(l.foreign) > 0 {
			res.Kept = append(res.Kept, apply.Kept{Object: ref, Reason: "managed by others"})
			continue
		}
		if _, ok := c.live[k]; ok {
			delete(c.live, k)
			c.deleted = append(c.deleted, k)
			res.Deleted = append(res.Deleted, ref)
		}
	}
	return res
}

func (c *fakeCluster) WaitDeleted(_ context.Context, refs []apply.ObjectRef) error {
	if err := c.enter("wait deleted"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ref := range refs {
		if _, ok := c.live[refKey(ref)]; ok {
			c.env.t.Errorf("%s: %s deleted but still there", c.name, refKey(ref))
		}
	}
	return nil
}

// waitPoll is how often the fake Wait looks at its objects (virtual time: free).
const waitPoll = 10 * time.Millisecond

// Wait behaves as apply.Applier.Wait does: nil once every object is there with the content
// asked for and ready; a *NotReadyError naming the objects that are not when ctx's deadline
// passes; ctx's error when ctx is cancelled.
func (c *fakeCluster) Wait(ctx context.Context, objs []*unstructured.Unstructured, _ time.Duration) error {
	if err := c.enter("wait"); err != nil {
		return err
	}
	if c.env.desired.matches(objs) && c.faults.unreachableVerify {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return fmt.Errorf("wait for %d objects to be ready: %w", len(objs), ctx.Err())
		}
		nre := &apply.NotReadyError{Timeout: time.Second}
		for _, obj := range objs {
			nre.Objects = append(nre.Objects, apply.ObjectStatus{Object: apply.RefOf(obj), Status: "Unknown",
				Message: errRefused(c.name).Error(), Unreadable: true})
		}
		return nre
	}
	for {
		statuses := c.notReady(objs)
		if len(statuses) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return fmt.Errorf("wait for %d objects to be ready: %w", len(objs), ctx.Err())
			}
			return &apply.NotReadyError{Objects: statuses, Timeout: time.Second}
		case <-time.After(waitPoll):
		}
	}
}

func (c *fakeCluster) notReady(objs []*unstructured.Unstructured) []apply.ObjectStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []apply.ObjectStatus
	for _, obj := range objs {
		ref := apply.RefOf(obj)
		l, ok := c.live[objKey(obj)]
		switch {
		case !ok:
			out = append(out, apply.ObjectStatus{Object: ref, Status: "NotFound", Message: "object not found"})
		case objJSON(l.obj) != objJSON(obj):
			out = append(out, apply.ObjectStatus{Object: ref, Status: "InProgress", Message: "not the content applied"})
		case !l.ready:
			out = append(out, apply.ObjectStatus{Object: ref, Status: "InProgress", Message: "Deployment does not have minimum availability"})
		}
	}
	return out
}

func (c *fakeCluster) Drift(_ context.Context, _ []*unstructured.Unstructured) ([]apply.Drift, error) {
	return nil, c.enter("drift")
}

func (c *fakeCluster) Existing(_ context.Context, objs []*unstructured.Unstructured) ([]apply.Existing, error) {
	if err := c.enter("existing"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.existing++
	var out []apply.Existing
	for _, obj := range objs {
		l, ok := c.live[objKey(obj)]
		if !ok {
			continue
		}
		managers := slices.Clone(l.foreign)
		if l.ours {
			managers = append(managers, c.env.spec.Key.FieldManager())
		}
		slices.Sort(managers)
		saved := objJSON(l.obj)
		out = append(out, apply.Existing{Object: apply.RefOf(obj), Managers: managers, Saved: json.RawMessage(saved), SavedSize: len(saved)})
	}
	return out, nil
}

func (c *fakeCluster) Release(_ context.Context, refs []apply.ObjectRef) error {
	if err := c.enter("release"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ref := range refs {
		k := refKey(ref)
		if l, ok := c.live[k]; ok {
			l.ours = false
			c.live[k] = l
			c.released = append(c.released, k)
		}
	}
	return nil
}

// Orphan hands objects to the legacy field manager, which every rollout counts as its own: the
// fake keeps them ours and notes them.
func (c *fakeCluster) Orphan(_ context.Context, refs []apply.ObjectRef) error {
	if err := c.enter("orphan"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ref := range refs {
		if _, ok := c.live[refKey(ref)]; ok {
			c.orphaned = append(c.orphaned, refKey(ref))
		}
	}
	return nil
}

func (c *fakeCluster) Revert(_ context.Context, saved []*unstructured.Unstructured) error {
	if err := c.enter("revert"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faults.restoreBroken {
		return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
	for _, obj := range saved {
		k := objKey(obj)
		l := c.live[k]
		c.live[k] = liveObject{obj: obj.DeepCopy(), ready: true, foreign: l.foreign}
		c.reverted = append(c.reverted, k)
		c.released = append(c.released, k)
	}
	return nil
}

// seedForeign puts obj on the cluster as made by someone else (managers), before any rollout.
func (c *fakeCluster) seedForeign(obj *unstructured.Unstructured, managers ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[objKey(obj)] = liveObject{obj: obj.DeepCopy(), ready: true, foreign: managers}
	c.seeded = append(c.seeded, obj.DeepCopy())
}

// describeLive renders the cluster's objects: "key=json" lines, sorted.
func (c *fakeCluster) describeLive() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for k, l := range c.live {
		lines = append(lines, k+"="+objJSON(l.obj))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// describeObjects renders objects as describeLive does.
func describeObjects(objs []*unstructured.Unstructured) string {
	var lines []string
	for _, obj := range objs {
		lines = append(lines, objKey(obj)+"="+objJSON(obj))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// describeState renders a cluster's records compactly: "current=a backup=b prov=c!reason ...".
func describeState(st *records.State) string {
	name := func(r *records.Revision) string {
		switch {
		case r == nil:
			return "-"
		case r.Reason != "":
			return r.Revision + "!"
		}
		return r.Revision
	}
	var inv, sup []string
	for i := range st.Invalid {
		inv = append(inv, name(&st.Invalid[i]))
	}
	for i := range st.Superseded {
		sup = append(sup, name(&st.Superseded[i]))
	}
	return fmt.Sprintf("current=%s backup=%s prov=%s invalid=%v superseded=%v",
		name(st.Current), name(st.Backup), name(st.Provisioning), inv, sup)
}

// gate stands for the clusters' gates (Service.gate), as their faults make them: three Nodes,
// n1 to n3, Ready unless a fault says otherwise.
func (e *env) gate(_ context.Context, _, name string, _ bool) (blame.GateReading, error) {
	c := e.clusters[name]
	if c == nil {
		return blame.GateReading{}, fmt.Errorf("no cluster %s", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	node := func(name, ready, reason string) blame.NodeState {
		return blame.NodeState{Name: name, UID: name + "-uid", Ready: ready, Reason: reason}
	}
	n1, n2, n3 := node("n1", "True", ""), node("n2", "True", ""), node("n3", "True", "")
	nodes := func(n ...blame.NodeState) (blame.GateReading, error) {
		return blame.GateReading{Nodes: n, NodesRead: true}, nil
	}
	switch {
	case c.faults.gateUnread:
		return blame.GateReading{}, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("cannot list resource \"nodes\""))
	case c.faults.sickBefore:
		return nodes(node("n1", "False", "KubeletNotReady"), n2, n3)
	case c.faults.sickAfter && c.runsDesired:
		return nodes(node("n1", "False", "KubeletNotReady"), n2, n3)
	case c.faults.churnAfter && c.runsDesired:
		// An autoscaler's and a spot market's day: n2 lost (its kubelet silent), n3 deleted,
		// n4 joining and not Ready yet.
		return nodes(n1, node("n2", "Unknown", "NodeStatusUnknown"), node("n4", "False", "KubeletNotReady"))
	}
	return nodes(n1, n2, n3)
}

// dial and goneReason stand for the management cluster's view of the clusters.
func (e *env) dial(_ context.Context, namespace, name string, _ bool) (*conn, error) {
	c := e.clusters[name]
	if c == nil {
		return nil, fmt.Errorf("no cluster %s", name)
	}
	c.mu.Lock()
	gone := c.gone
	c.mu.Unlock()
	if gone {
		secret := fleet.KubeconfigSecretName(name)
		return nil, fmt.Errorf("cluster %s/%s: kubeconfig Secret %s not found: %w", namespace, name, secret,
			apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, secret))
	}
	return &conn{client: c.rec, applier: c}, nil
}

// discover picks every cluster of the fleet (or those q names), as CAPI Clusters ready to
// change: a gone cluster has lost its kubeconfig Secret.
func (e *env) discover(_ context.Context, q fleet.Query) (*fleet.Discovery, error) {
	if q.WithoutSecrets {
		return nil, errors.New("direct mode listed the Clusters without their kubeconfig Secrets")
	}
	names := e.names
	if len(q.Names) > 0 {
		names = q.Names
	}
	d := &fleet.Discovery{}
	for _, name := range names {
		c := e.clusters[name]
		if c == nil {
			d.Missing = append(d.Missing, name)
			continue
		}
		found := fleet.Cluster{Name: name, Namespace: q.Namespace, Phase: "Provisioned", ControlPlaneReady: true, InfrastructureReady: true, KubeconfigAvailable: true}
		found.Labels = e.labels[name]
		c.mu.Lock()
		if c.gone {
			found.KubeconfigAvailable, found.SkipReason = false, "kubeconfig Secret not found"
		}
		c.mu.Unlock()
		d.Clusters = append(d.Clusters, found)
	}
	return d, nil
}

func (e *env) goneReason(_ context.Context, namespace, name string, withoutSecrets bool) (string, error) {
	if withoutSecrets {
		return "", errors.New("direct mode asked without reading the kubeconfig Secret")
	}
	e.mu.Lock()
	e.goneChecks++
	e.mu.Unlock()
	c := e.clusters[name]
	if c == nil {
		return "", fmt.Errorf("no cluster %s", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return fmt.Sprintf("kubeconfig Secret %s/%s was deleted", namespace, fleet.KubeconfigSecretName(name)), nil
	}
	return "", nil
}

// TakeOver: the fake makes no object through a bridge, so there is nothing to take over.
func (c *fakeCluster) TakeOver(context.Context, []apply.ObjectRef) error { return nil }

// Forget: the fake keeps no field managers, so there is nothing to drop.
func (c *fakeCluster) Forget(context.Context, []apply.ObjectRef, string) error { return nil }
