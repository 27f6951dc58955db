package delivery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// These tests run the engine against the delivery World (world.go, errors.go, progress.go) over
// fake workload clusters that inject faults (fake_test.go), and check after every run the
// invariants of the engine's simulation (internal/engine/sim_world_test.go) on what the clusters
// and the management cluster really hold: every change recorded before it is made, no record
// lost, the failure budget respected (infrastructure failures and vanished clusters never count),
// nothing restored twice, and the ledger holding the revision only after a revision failure.
//
// Each run is in a synctest bubble with the system clock: time is virtual, so verify timeouts,
// retry backoff and the two-minute retry window of applies cost nothing, and runs are
// deterministic.

// start is the state a fake cluster starts in.
type start int

const (
	startFresh       start = iota // nothing of the rollout
	startOld                      // settled on the old revision
	startInterrupted              // on the old revision, left provisioning desired with only web-config applied
	// startUnrecorded: the old revision's objects are there under the rollout's field manager,
	// but its records are gone (the record namespace deleted by a cleanup).
	startUnrecorded
)

func (s start) String() string {
	return [...]string{"fresh", "old", "interrupted", "unrecorded"}[s]
}

type clusterSpec struct {
	name   string
	start  start
	faults faults
}

// snapshot is what a cluster held before the run.
type snapshot struct {
	records string
	live    string
}

// env is one rollout over a fake fleet.
type env struct {
	t       *testing.T
	spec    Spec
	old     revisionFixture
	desired revisionFixture
	mgmt    client.WithWatch // the management cluster: the ledger
	// progressClient holds the progress record (see run).
	progressClient client.WithWatch
	svc            *Service
	names          []string
	clusters       map[string]*fakeCluster
	initial        map[string]snapshot

	// labels are the Clusters' labels, by name, as discover reports them.
	labels map[string]map[string]string

	mu         sync.Mutex
	goneChecks int
	logs       []string
}

// testPolicy is a policy with short timeouts (virtual time in any case).
func testPolicy(t testing.TB, updateLimit, maxFailures string, onFailure engine.OnFailure) engine.Policy {
	t.Helper()
	ul, err := engine.ParseLimit(updateLimit)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := engine.ParseMaxFailures(maxFailures)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Policy{UpdateLimit: ul, MaxFailures: mf, OnFailure: onFailure,
		VerifyTimeout: 300 * time.Millisecond, RollbackTimeout: 300 * time.Millisecond}
}

// newEnv builds the fleet, the management cluster and the Service; call it in a synctest bubble.
func newEnv(t *testing.T, policy engine.Policy, specs []clusterSpec) *env {
	t.Helper()
	e := &env{
		t:        t,
		old:      newFixture(t, oldManifests),
		desired:  newFixture(t, desiredManifests),
		mgmt:     newFakeClient(), // Secrets are all the management store uses
		clusters: map[string]*fakeCluster{},
		initial:  map[string]snapshot{},
	}
	e.progressClient = newFakeClient()
	e.spec = Spec{
		Key:              records.Key{Kind: "rollout", Namespace: "fleet", Name: "web"},
		ClusterNamespace: "fleet",
		RecordNamespace:  "gradual-system",
		Objects:          e.desired.set,
		Revision:         e.desired.revision,
		Policy:           policy,
		ClusterGates:     true,
	}
	e.svc = &Service{engine: directEngine{},
		mgmt:        &fleet.Management{Client: e.mgmt},
		concurrency: 4,
		clock:       engine.SystemClock{},
		dial:        e.dial,
		recheck:     func(string, string) {},
		goneReason:  e.goneReason,
		discover:    e.discover,
		gate:        e.gate,
		retryWait:   time.Millisecond,
	}
	ctx := context.Background()
	for _, s := range specs {
		c := newFakeCluster(e, s.name, faults{})
		e.names = append(e.names, s.name)
		e.clusters[s.name] = c
		store := records.NewWorkloadStore(c.base, e.spec.RecordNamespace)
		if s.start == startOld || s.start == startInterrupted {
			if err := store.MarkProvisioning(ctx, e.spec.Key, e.old.record()); err != nil {
				t.Fatal(err)
			}
			if err := store.MarkCurrent(ctx, e.spec.Key, e.old.revision); err != nil {
				t.Fatal(err)
			}
			for _, obj := range e.old.set.Objects {
				c.live[objKey(obj)] = liveObject{obj: obj.DeepCopy(), ready: true}
			}
		}
		if s.start == startUnrecorded {
			c.unrecorded = true
			for _, obj := range e.old.set.Objects {
				c.live[objKey(obj)] = liveObject{obj: obj.DeepCopy(), ready: true, ours: true}
			}
		}
		if s.start == startInterrupted {
			if err := store.MarkProvisioning(ctx, e.spec.Key, e.desired.record()); err != nil {
				t.Fatal(err)
			}
			obj := e.desiredObject("ConfigMap", "web-config")
			c.live[objKey(obj)] = liveObject{obj: obj.DeepCopy(), ready: true}
		}
		e.initial[s.name] = snapshot{records: e.describeRecords(c), live: c.describeLive()}
		c.faults = s.faults // armed once the cluster is set up
	}
	return e
}

func (e *env) desiredObject(kind, name string) *unstructured.Unstructured {
	for _, obj := range e.desired.set.Objects {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	e.t.Fatalf("no %s %s in the desired revision", kind, name)
	return nil
}

func (e *env) logf(msg string, _ map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logs = append(e.logs, msg)
}

func (e *env) load(c *fakeCluster) *records.State {
	st, err := records.NewWorkloadStore(c.base, e.spec.RecordNamespace).Load(context.Background(), e.spec.Key)
	if err != nil {
		e.t.Fatalf("%s: read records: %v", c.name, err)
	}
	return st
}

func (e *env) describeRecords(c *fakeCluster) string { return describeState(e.load(c)) }

// objectsOf renders what cluster c runs on revision ("" = nothing): the revision's objects, and
// the objects someone else made before the rollout (seedForeign) that the revision does not
// hold, as they were made: adopted objects are never deleted, and the revision that adopted
// them is undone on them too.
func (e *env) objectsOf(c *fakeCluster, revision string) string {
	var objs []*unstructured.Unstructured
	switch revision {
	case "":
	case e.old.revision:
		objs = e.old.set.Objects
	case e.desired.revision:
		objs = e.desired.set.Objects
	default:
		e.t.Fatalf("unknown revision %s", revision)
	}
	inv := apply.InventoryOf(objs)
	objs = slices.Clone(objs)
	for _, obj := range c.seeded {
		if !inv.Contains(apply.RefOf(obj)) {
			objs = append(objs, obj)
			inv = append(inv, apply.RefOf(obj))
		}
	}
	// Objects another manager took over entirely are theirs: prune and delete keep them.
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.live {
		if !l.ours && len(l.foreign) > 0 && !inv.Contains(apply.RefOf(l.obj)) {
			objs = append(objs, l.obj)
		}
	}
	return describeObjects(objs)
}

func (e *env) show(revision string) string {
	switch revision {
	case "":
		return "(none)"
	case e.old.revision:
		return "old"
	case e.desired.revision:
		return "desired"
	}
	return revision
}

// runResult is what one run did and left.
type runResult struct {
	plan     engine.Plan
	res      engine.Result
	watch    *watchWorld
	progress *records.Progress
	ledger   []records.InvalidEntry
	notes    []string // what the World said about adopted objects
	gates    []string // what the gates saw and did not judge
	kept     []string // what prune left in place, and why
}

// run plans the rollout from what the clusters' records say (as Observe does), executes it on
// the delivery World, records its end in the progress record (as Run does) and checks the
// invariants.
func (e *env) run() runResult {
	e.t.Helper()
	ctx := context.Background()
	var targets []engine.Target
	for _, name := range e.names {
		rec, _, err := observeOne(ctx, e.svc, e.spec, name)
		if err != nil {
			e.t.Fatalf("observe %s: %v", name, err)
		}
		targets = append(targets, engine.Target{Name: name, Record: rec})
	}
	plan := engine.PlanRollout(targets, e.spec.Revision, e.spec.Policy)
	// The progress record is kept apart from the ledger (in production they share one Secret):
	// progressWriter holds its mutex across the write, so a write that met a conflict with a
	// ledger update would back off (a sleep) under that mutex while other targets wait for it,
	// which synctest's virtual clock cannot advance past. The records package tests the shared
	// Secret; here each store is checked on its own.
	pstore := records.NewManagementStore(e.progressClient, e.spec.RecordNamespace)
	progress := &progressWriter{store: pstore, key: e.spec.Key, progress: records.Progress{
		Phase: records.PhaseRunning, Revision: e.spec.Revision, Waves: len(plan.Waves),
		Clusters: map[string]records.ClusterOutcome{},
	}}
	progress.save(ctx)
	w := &world{svc: e.svc, spec: e.spec, progress: progress, logf: e.logf, untouched: untouchedOf(plan)}
	w.engine = w.svc.engine.run(w)
	watch := &watchWorld{World: w, e: e, plan: plan, restores: map[string]int{}}
	res := engine.Execute(ctx, plan, watch, e.svc.clock, e.spec.Policy)
	progress.finish(ctx, &res)

	r := runResult{plan: plan, res: res, watch: watch, notes: w.Notes(), kept: w.Kept(), gates: w.GateNotes()}
	var err error
	if r.progress, err = pstore.LoadProgress(ctx, e.spec.Key); err != nil || r.progress == nil {
		e.t.Fatalf("progress record: %v, %v", r.progress, err)
	}
	if r.ledger, err = e.svc.managementStore(e.spec.RecordNamespace).Ledger(ctx, e.spec.Key); err != nil {
		e.t.Fatalf("ledger: %v", err)
	}
	e.check(r)
	if e.t.Failed() {
		e.t.Logf("plan:\n  %s", strings.Join(plan.Notes, "\n  "))
		for _, o := range res.Outcomes {
			e.t.Logf("outcome %s: %s on %s failed=%v invalid=%v unsettled=%v error=%q",
				o.Target, o.Status, e.show(o.Revision), o.Failed, o.Invalid, o.Unsettled, o.Error)
		}
		e.mu.Lock()
		e.t.Logf("log:\n  %s", strings.Join(e.logs, "\n  "))
		e.mu.Unlock()
	}
	return r
}

// watchWorld wraps the delivery World to watch the engine's calls: the budget at every wave
// start, the clusters that vanish as their wave starts, and the restores.
type watchWorld struct {
	engine.World
	e    *env
	plan engine.Plan

	mu       sync.Mutex
	failures int            // EventFailed records seen
	restores map[string]int // Restore calls per target
	waves    [][]string
}

// Held passes the engine's question on to the delivery World (its windows and cluster gates).
func (w *watchWorld) Held(target string) string {
	if h, ok := w.World.(engine.Holder); ok {
		return h.Held(target)
	}
	return ""
}

func (w *watchWorld) Record(ctx context.Context, ev engine.Event) error {
	w.mu.Lock()
	switch {
	case ev.Kind == engine.EventFailed:
		w.failures++
	case ev.Kind == engine.EventBatchStarted && ev.Phase == engine.PhaseWave:
		if w.failures > w.plan.MaxFailures {
			w.e.t.Errorf("wave %d started after %d failures, max_failures %d", ev.Batch, w.failures, w.plan.MaxFailures)
		}
		w.waves = append(w.waves, slices.Clone(ev.Targets))
		for _, name := range ev.Targets {
			if c := w.e.clusters[name]; c.faults.goneAtWave {
				c.vanish()
			}
		}
	case ev.Kind == engine.EventBatchStarted && ev.Phase == engine.PhaseRollback:
		if w.failures <= w.plan.MaxFailures || w.e.spec.Policy.OnFailure == engine.Halt {
			w.e.t.Errorf("rollback after %d failures, max_failures %d, on_failure %s", w.failures, w.plan.MaxFailures, w.e.spec.Policy.OnFailure)
		}
	}
	w.mu.Unlock()
	return w.World.Record(ctx, ev)
}

func (w *watchWorld) Restore(ctx context.Context, target, revision string) error {
	w.mu.Lock()
	w.restores[target]++
	w.mu.Unlock()
	return w.World.Restore(ctx, target, revision)
}

// check verifies the invariants on what the run left.
func (e *env) check(r runResult) {
	t := e.t
	t.Helper()
	desired := e.desired.revision
	failed := 0
	var invalid []string
	for _, o := range r.res.Outcomes {
		if o.Failed {
			failed++
		}
		if o.Invalid {
			invalid = append(invalid, o.Target)
		}
	}
	// Budget: every failure is counted once; the run aborts exactly when they exceed the budget.
	if r.res.Failures != failed || r.watch.failures != failed {
		t.Errorf("result counts %d failures, %d outcomes failed, %d failures recorded", r.res.Failures, failed, r.watch.failures)
	}
	lost := 0
	for _, o := range r.res.Outcomes {
		if o.Status == engine.StatusLostContact {
			lost++
		}
	}
	if r.res.Aborted != (failed > r.plan.MaxFailures || r.res.LostContact > r.plan.MaxUnsettled) || lost > r.res.LostContact {
		t.Errorf("aborted %v with %d failures, max_failures %d, %d lost contact (%d outcomes), max_unsettled %d", r.res.Aborted, failed,
			r.plan.MaxFailures, r.res.LostContact, lost, r.plan.MaxUnsettled)
	}
	rollback := e.spec.Policy.OnFailure != engine.Halt

	for _, o := range r.res.Outcomes {
		c := e.clusters[o.Target]
		in := r.plan.Intents[o.Target]
		init := e.initial[o.Target]
		f := c.faults
		st := e.load(c)
		now := describeState(st)
		live := c.describeLive()
		errorf := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%s (%s, faults %+v): %s", o.Target, o.Status, f, fmt.Sprintf(format, args...))
		}

		// Nothing restored twice: a target is restored at most once per phase (a resume that
		// restores it, then the failure of its wave).
		allowed := 1
		if in.Action == engine.ActionRestore {
			allowed = 2
		}
		if n := r.watch.restores[o.Target]; n > allowed {
			errorf("restored %d times", n)
		}
		if c.restoreOps > allowed {
			errorf("%d restores made on the cluster", c.restoreOps)
		}

		// Classes: only revision failures and refused changes count, only revision failures are
		// recorded invalid, and a vanished cluster is touched no more.
		if o.Failed && !f.counted() {
			errorf("counted against the budget without a fault of the revision")
		}
		if o.Invalid && !f.invalid() {
			errorf("recorded invalid without a fault of the revision")
		}
		if o.Status == engine.StatusGone && !f.gone() {
			errorf("gone, but its cluster is there")
		}
		if len(c.afterGone) > 0 {
			errorf("called after it was gone: %v", c.afterGone)
		}
		if _, recorded := st.InvalidRevisions()[desired]; recorded != o.Invalid {
			errorf("outcome invalid %v, records say %v (%s)", o.Invalid, recorded, now)
		}
		e.checkFaultOutcome(r, o, f, rollback)

		// No record lost: the records say where the cluster is, and the cluster is there.
		switch o.Status {
		case engine.StatusSucceeded:
			if st.Current == nil || st.Current.Revision != desired || st.Provisioning != nil {
				errorf("records %s, want current desired and settled", now)
			}
			if live != e.objectsOf(c, desired) {
				errorf("runs\n%s\nwant the desired objects", live)
			}
		case engine.StatusFailed, engine.StatusRestored, engine.StatusRolledBack, engine.StatusCancelled:
			cur := ""
			if st.Current != nil {
				cur = st.Current.Revision
			}
			if cur != in.RestoreTo || st.Provisioning != nil {
				errorf("records %s, want current %s and settled", now, e.show(in.RestoreTo))
			}
			if live != e.objectsOf(c, in.RestoreTo) {
				errorf("runs\n%s\nwant the objects of %s", live, e.show(in.RestoreTo))
			}
			if o.Unsettled {
				errorf("settled but the outcome says unsettled")
			}
		case engine.StatusUnsettled:
			if strings.HasPrefix(o.Error, "record provisioning: ") {
				if now != init.records || live != init.live {
					errorf("its provisioning record could not be written, yet it changed: records %s (were %s)", now, init.records)
				}
			} else if st.Provisioning == nil || st.Provisioning.Revision != desired || !o.Unsettled || o.Provisioning != desired {
				errorf("records %s, outcome unsettled %v on %q: want provisioning desired", now, o.Unsettled, e.show(o.Provisioning))
			}
		case engine.StatusLostContact:
			// Restored where the cluster let it be: settled on the restore point, or still
			// provisioning for the next run.
			if o.Unsettled {
				if st.Provisioning == nil {
					errorf("records %s, outcome unsettled: want provisioning", now)
				}
			} else {
				cur := ""
				if st.Current != nil {
					cur = st.Current.Revision
				}
				if cur != in.RestoreTo || st.Provisioning != nil || live != e.objectsOf(c, in.RestoreTo) {
					errorf("records %s, want restored to %s and settled", now, e.show(in.RestoreTo))
				}
			}
		case engine.StatusGone:
			if now != c.goneRecords {
				errorf("records %s changed after it went (were %s)", now, c.goneRecords)
			}
		case engine.StatusNotStarted, engine.StatusAlreadyCurrent, engine.StatusSkipped:
			if now != init.records || live != init.live || r.watch.restores[o.Target] > 0 {
				errorf("touched: records %s (were %s), live changed %v", now, init.records, live != init.live)
			}
		default:
			errorf("unexpected status")
		}

		// The progress record ends with the outcome (a rollback left unsettled stays rolling back).
		p := r.progress.Clusters[o.Target]
		rollingBackUnsettled := p.State == string(engine.EventRollingBack) && o.Unsettled
		if p.State != string(o.Status) && !rollingBackUnsettled {
			errorf("progress record says %q", p.State)
		}
	}

	// The ledger holds the desired revision exactly when a cluster recorded it invalid.
	var entry *records.InvalidEntry
	for i := range r.ledger {
		if r.ledger[i].Revision == desired {
			entry = &r.ledger[i]
		} else {
			t.Errorf("ledger holds revision %s", r.ledger[i].Revision)
		}
	}
	switch {
	case len(invalid) == 0 && entry != nil:
		t.Errorf("ledger holds the desired revision (%v: %s) but no cluster recorded it invalid", entry.Clusters, entry.Reason)
	case len(invalid) > 0 && entry == nil:
		t.Errorf("%v recorded the desired revision invalid but the ledger does not hold it", invalid)
	case entry != nil && !slices.Equal(entry.Clusters, invalid):
		t.Errorf("ledger lists %v, want %v", entry.Clusters, invalid)
	}
	wantPhase := records.PhaseSucceeded
	if r.res.Err() != nil {
		wantPhase = records.PhaseFailed
	}
	if r.progress.Phase != wantPhase {
		t.Errorf("progress phase %s, want %s", r.progress.Phase, wantPhase)
	}
}

// checkFaultOutcome checks that a cluster ended as its faults make it end.
// anySickBefore reports whether a cluster other than target has a gate unhealthy from the start.
func (e *env) anySickBefore(target string) bool {
	for name, c := range e.clusters {
		if name != target && c.faults.sickBefore {
			return true
		}
	}
	return false
}

func (e *env) checkFaultOutcome(r runResult, o engine.Outcome, f faults, rollback bool) {
	t := e.t
	t.Helper()
	wrong := func(want string) {
		t.Helper()
		t.Errorf("%s (faults %+v): ended %s failed=%v invalid=%v (%s), want %s", o.Target, f, o.Status, o.Failed, o.Invalid, o.Error, want)
	}
	switch o.Status {
	case engine.StatusNotStarted:
		if !r.res.Aborted {
			wrong("not started only when the run aborted")
		}
		return
	case engine.StatusRolledBack:
		if !r.res.Aborted || !rollback {
			wrong("rolled back only when the run aborted with on_failure rollback")
		}
	}
	c := e.clusters[o.Target]
	switch {
	case f.sickBefore:
		if o.Status != engine.StatusSkipped || o.Failed || !strings.Contains(o.Error, "cluster gate: unhealthy before the change") {
			wrong("skipped by its gate, not counted")
		}
	case c.unrecorded && !f.goneAtWave && !e.spec.AdoptUnrecorded:
		// Its records are gone but the rollout's objects are there: refused before anything is
		// written, whatever the revision would have done (unrecorded.go).
		if o.Status != engine.StatusUnsettled || o.Failed || !strings.HasPrefix(o.Error, "record provisioning: records missing: ") {
			wrong("unsettled, its provisioning refused: records missing")
		}
	case f.gone():
		if o.Status != engine.StatusGone || o.Failed {
			wrong("gone, not counted")
		}
	case f.recordsDown:
		if o.Status != engine.StatusUnsettled || o.Failed || !strings.HasPrefix(o.Error, "record provisioning: ") {
			wrong("unsettled, its provisioning record not written")
		}
	case f.unreachableVerify || (f.applyErr != nil && revisionClass(f.applyErr) == nil):
		// Reachable before its change, not after: lost contact, never blamed on the revision.
		if o.Status != engine.StatusLostContact || o.Failed || o.Invalid {
			wrong("lost-contact, not counted, not invalid")
		}
	case f.sickAfter && !f.gateUnread && strings.Contains(o.Error, "cluster gate: shows on untouched clusters too"):
		// Its gate failed after the change, but a cluster the revision had not reached showed
		// the same: the fleet's problem, never the revision's. Only when one really was sick.
		if !e.anySickBefore(o.Target) {
			wrong("the gate corroborated by an untouched cluster only when one was sick")
		}
		if o.Status != engine.StatusLostContact && o.Status != engine.StatusUnsettled || o.Failed || o.Invalid {
			wrong("lost-contact or unsettled, not counted, not invalid")
		}
	case f.counted():
		want := engine.StatusFailed
		if f.restoreBroken {
			want = engine.StatusUnsettled
		}
		if o.Status != want || !o.Failed || o.Invalid != f.invalid() {
			wrong(fmt.Sprintf("%s, counted, invalid %v", want, f.invalid()))
		}
	default:
		switch {
		case o.Status == engine.StatusSucceeded && (!r.res.Aborted || !rollback || r.res.Failures <= r.res.MaxFailures):
			// Only failures of the revision past max_failures roll back; a halt for lost
			// contact leaves the clusters that succeeded.
		case o.Status == engine.StatusRolledBack:
		default:
			wrong("succeeded (or rolled back)")
		}
	}
}

// Errors the fake clusters answer with.
var (
	errAdmission = apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
		errors.New(`admission webhook "images.policy.example.com" denied the request: image registry.example.com/web:2 is not signed`))
	// errWebhookDown: a fail-closed admission webhook whose pods are not serving; the API server
	// refuses every write it guards, whatever its content.
	errWebhookDown = apierrors.NewInternalError(errors.New(`failed calling webhook "images.policy.example.com": failed to call webhook: ` +
		`Post "https://policy.policy-system.svc:443/validate?timeout=10s": dial tcp 10.96.12.7:443: connect: connection refused`))
	errRBAC = apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
		errors.New(`User "system:serviceaccount:gradual:deployer" cannot patch resource "deployments" in API group "apps" in the namespace "demo"`))
	errConflict = &apply.ConflictError{Object: apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"},
		Conflicts: []apply.FieldConflict{{Manager: "flux", Field: ".spec.replicas", Applied: true}}}
)

// want is what a scenario expects, beyond the invariants.
type want struct {
	status   map[string]engine.Status
	aborted  bool
	failures int
	extra    func(t *testing.T, e *env, r runResult)
}

func TestWorldScenarios(t *testing.T) {
	three := func(s2 faults) []clusterSpec {
		return []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, s2}, {"c3", startOld, faults{}}}
	}
	st := func(c1, c2, c3 engine.Status) map[string]engine.Status {
		return map[string]engine.Status{"c1": c1, "c2": c2, "c3": c3}
	}
	const (
		ok          = engine.StatusSucceeded
		failed      = engine.StatusFailed
		rolledBack  = engine.StatusRolledBack
		notStarted  = engine.StatusNotStarted
		unsettled   = engine.StatusUnsettled
		lostContact = engine.StatusLostContact
		gone        = engine.StatusGone
	)
	gatesSay := func(notes ...string) func(*testing.T, *env, runResult) {
		return func(t *testing.T, _ *env, r runResult) {
			for _, n := range notes {
				if !slices.Contains(r.gates, n) {
					t.Errorf("gate notes %q, want %q among them", r.gates, n)
				}
			}
		}
	}
	errorHas := func(target string, parts ...string) func(*testing.T, *env, runResult) {
		return func(t *testing.T, e *env, r runResult) {
			o, _ := r.res.Outcome(target)
			for _, p := range parts {
				if !strings.Contains(o.Error, p) {
					t.Errorf("%s: error %q does not say %q", target, o.Error, p)
				}
			}
		}
	}
	tests := []struct {
		name         string
		clusters     []clusterSpec
		maxFailures  string
		maxUnsettled string
		onFailure    engine.OnFailure
		want         want
	}{{
		name:     "all good",
		clusters: three(faults{}),
		want: want{status: st(ok, ok, ok), extra: func(t *testing.T, e *env, r runResult) {
			for _, c := range e.clusters {
				if !slices.Contains(c.deleted, "/ConfigMap/demo/legacy") || !slices.Contains(c.created, "/ConfigMap/demo/extra") {
					t.Errorf("%s: created %v, deleted %v: want extra created and legacy pruned", c.name, c.created, c.deleted)
				}
				if st := e.load(c); st.Backup == nil || st.Backup.Revision != e.old.revision {
					t.Errorf("%s: records %s, want the old revision as backup", c.name, describeState(st))
				}
			}
			if e.goneChecks != 0 {
				t.Errorf("asked the management cluster %d times whether a cluster is gone, with no failure", e.goneChecks)
			}
		}},
	}, {
		name:     "objects never ready: failed, restored, invalid, the others rolled back",
		clusters: three(faults{neverReady: true}),
		want: want{status: st(rolledBack, failed, notStarted), aborted: true, failures: 1,
			extra: errorHas("c2", "timed out after 300ms", "Deployment demo/web: InProgress")},
	}, {
		name:        "objects never ready within max_failures",
		clusters:    three(faults{neverReady: true}),
		maxFailures: "1",
		want:        want{status: st(ok, failed, ok), failures: 1},
	}, {
		name:     "workload API unreachable during verify: lost contact, not counted, not invalid, later waves halted",
		clusters: three(faults{unreachableVerify: true}),
		want: want{status: st(ok, lostContact, notStarted), aborted: true, extra: func(t *testing.T, e *env, r runResult) {
			errorHas("c2", "timed out after 300ms", "connection refused")(t, e, r)
			if r.res.LostContact != 1 || r.res.RolledBack {
				t.Errorf("lost contact %d, rolled back %v: want 1 and nothing rolled back", r.res.LostContact, r.res.RolledBack)
			}
		}},
	}, {
		name:         "workload API unreachable during verify within max_unsettled: the rollout goes on",
		clusters:     three(faults{unreachableVerify: true}),
		maxUnsettled: "1",
		want:         want{status: st(ok, lostContact, ok), extra: errorHas("c2", "connection refused")},
	}, {
		name:     "kubeconfig Secret deleted mid-wave: gone, not counted, nothing rolled back",
		clusters: three(faults{goneAtApply: true}),
		want: want{status: st(ok, gone, ok), extra: func(t *testing.T, e *env, r runResult) {
			errorHas("c2", "kubeconfig Secret fleet/c2-kubeconfig was deleted")(t, e, r)
			if st := e.load(e.clusters["c2"]); st.Provisioning == nil || st.Provisioning.Revision != e.desired.revision {
				t.Errorf("c2: records %s, want them as the cluster left them (provisioning desired)", describeState(st))
			}
			if !slices.ContainsFunc(r.res.Warnings(), func(w string) bool { return strings.Contains(w, "c2 vanished") }) {
				t.Errorf("warnings %q do not report c2 gone", r.res.Warnings())
			}
		}},
	}, {
		name:     "kubeconfig Secret deleted as its wave starts: gone before any change",
		clusters: []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}, {"c3", startFresh, faults{goneAtWave: true}}},
		want: want{status: st(ok, ok, gone), extra: func(t *testing.T, e *env, r runResult) {
			if got := e.describeRecords(e.clusters["c3"]); got != e.initial["c3"].records {
				t.Errorf("c3: records %s, were %s", got, e.initial["c3"].records)
			}
		}},
	}, {
		name: "429s on records writes pass after two tries",
		clusters: []clusterSpec{{"c1", startOld, faults{throttle: 2}}, {"c2", startFresh, faults{throttle: 2}},
			{"c3", startInterrupted, faults{throttle: 2}}},
		want: want{status: st(ok, ok, ok), extra: func(t *testing.T, e *env, r runResult) {
			for _, c := range e.clusters {
				if c.throttled != 2 {
					t.Errorf("%s: %d writes throttled, want 2", c.name, c.throttled)
				}
			}
		}},
	}, {
		name:     "records unwritable: unsettled, nothing applied",
		clusters: three(faults{recordsDown: true}),
		want: want{status: st(ok, unsettled, ok), extra: func(t *testing.T, e *env, r runResult) {
			if c := e.clusters["c2"]; c.desiredApply != 0 {
				t.Errorf("c2: desired applied %d times without its provisioning record", c.desiredApply)
			}
		}},
	}, {
		name:        "admission webhook denial on apply: failed, recorded invalid",
		clusters:    three(faults{applyErr: errAdmission}),
		maxFailures: "1",
		want:        want{status: st(ok, failed, ok), failures: 1, extra: errorHas("c2", `admission webhook "images.policy.example.com" denied the request`)},
	}, {
		name:     "RBAC forbidden on apply: infrastructure after the change began, lost contact, not invalid",
		clusters: three(faults{applyErr: errRBAC}),
		want: want{status: st(ok, lostContact, notStarted), aborted: true, extra: func(t *testing.T, e *env, r runResult) {
			errorHas("c2", "cannot patch resource")(t, e, r)
			if e.goneChecks == 0 {
				t.Errorf("an infrastructure failure was not checked against the management cluster")
			}
		}},
	}, {
		name:     "field-manager conflict: failed and counted, not invalid",
		clusters: three(faults{applyErr: errConflict}),
		want:     want{status: st(rolledBack, failed, notStarted), aborted: true, failures: 1, extra: errorHas("c2", `owned by field manager "flux"`)},
	}, {
		name:        "revision failure whose restore fails: unsettled, counted, invalid",
		clusters:    three(faults{neverReady: true, restoreBroken: true}),
		maxFailures: "1",
		want:        want{status: st(ok, unsettled, ok), failures: 1, extra: errorHas("c2", "restore to", "restore timeout 300ms exceeded")},
	}, {
		name:     "resume: applied again, missing objects created, the previous revision's pruned",
		clusters: []clusterSpec{{"c1", startInterrupted, faults{}}, {"c2", startOld, faults{}}, {"c3", startFresh, faults{}}},
		want: want{status: st(ok, ok, ok), extra: func(t *testing.T, e *env, r runResult) {
			in := r.plan.Intents["c1"]
			if in.Action != engine.ActionApply || in.Provisioning != e.desired.revision || in.RestoreTo != e.old.revision {
				t.Errorf("c1: intent %+v, want apply desired again, restoring to old", in)
			}
			c := e.clusters["c1"]
			if c.desiredApply != 1 {
				t.Errorf("c1: desired applied %d times, want 1", c.desiredApply)
			}
			if !slices.Equal(c.created, []string{"/ConfigMap/demo/extra"}) || !slices.Equal(c.deleted, []string{"/ConfigMap/demo/legacy"}) {
				t.Errorf("c1: created %v, deleted %v: want extra created, legacy pruned", c.created, c.deleted)
			}
			if st := e.load(c); st.Backup == nil || st.Backup.Revision != e.old.revision {
				t.Errorf("c1: records %s, want old as backup", describeState(st))
			}
		}},
	}, {
		name: "resume that fails: restored to the revision before",
		clusters: []clusterSpec{{"c1", startInterrupted, faults{neverReady: true}}, {"c2", startFresh, faults{neverReady: true}},
			{"c3", startOld, faults{}}},
		maxFailures: "2",
		want:        want{status: st(failed, failed, ok), failures: 2},
	}, {
		name:        "a Node NotReady after the change: failed by its gate, restored, invalid",
		clusters:    three(faults{sickAfter: true}),
		maxFailures: "1",
		want: want{status: st(ok, failed, ok), failures: 1,
			extra: errorHas("c2", "cluster gate: Node became NotReady: Node n1 Ready is False (KubeletNotReady)", "Ready before the change")},
	}, {
		name:     "a Node NotReady after the change that shows on a cluster the revision has not reached: the fleet's, never invalid",
		clusters: []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{sickAfter: true}}, {"c3", startOld, faults{sickBefore: true}}},
		want: want{status: st(ok, lostContact, notStarted), aborted: true, extra: func(t *testing.T, e *env, r runResult) {
			o, _ := r.res.Outcome("c2")
			if o.Invalid || o.Failed || !strings.Contains(o.Error, "cluster gate: shows on untouched clusters too") || !strings.Contains(o.Error, "c3 (Node n1 Ready is False") {
				t.Errorf("c2: %+v; want unsettled by the gate's corroboration, naming c3", o)
			}
		}},
	}, {
		name:     "Nodes joining, lost and deleted during the wave: named, never blamed on the revision",
		clusters: three(faults{churnAfter: true}),
		want: want{status: st(ok, ok, ok), extra: gatesSay(
			"c2: cluster gate: Node n4 joined during the wave, not judged",
			"c2: cluster gate: Node n3 was deleted during the wave, not judged",
			"c2: cluster gate: Node n2 Ready is Unknown (NodeStatusUnknown): kubelet stopped posting (a lost node), not judged")},
	}, {
		name:     "a Node NotReady before the change: skipped with the reason, never blamed on the revision",
		clusters: three(faults{sickBefore: true}),
		want: want{status: st(ok, engine.StatusSkipped, ok),
			extra: errorHas("c2", "held back when its wave started: cluster gate: unhealthy before the change", "Node n1 Ready is False")},
	}, {
		name:     "gates that cannot be read before the change are not checked after it, and the run says so",
		clusters: three(faults{sickAfter: true, gateUnread: true}),
		want: want{status: st(ok, ok, ok), extra: gatesSay(
			`c2: cluster gate not read before the change, so not checked after it: nodes is forbidden: cannot list resource "nodes"`)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mf := tt.maxFailures
				if mf == "" {
					mf = "0"
				}
				policy := testPolicy(t, "1", mf, tt.onFailure)
				if tt.maxUnsettled != "" {
					l, err := engine.ParseMaxUnsettled(tt.maxUnsettled)
					if err != nil {
						t.Fatal(err)
					}
					policy.MaxUnsettled = l
				}
				e := newEnv(t, policy, tt.clusters)
				r := e.run()
				for name, want := range tt.want.status {
					if o, _ := r.res.Outcome(name); o.Status != want {
						t.Errorf("%s ended %s, want %s (%s)", name, o.Status, want, o.Error)
					}
				}
				if r.res.Aborted != tt.want.aborted || r.res.Failures != tt.want.failures {
					t.Errorf("aborted %v with %d failures, want %v with %d", r.res.Aborted, r.res.Failures, tt.want.aborted, tt.want.failures)
				}
				if tt.want.extra != nil {
					tt.want.extra(t, e, r)
				}
			})
		})
	}
}

// TestWorldRandomFaults runs rollouts over fleets of fake clusters with random starting states,
// faults and policies, checking the invariants after each.
func TestWorldRandomFaults(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		n := 3 + rng.IntN(3)
		var specs []clusterSpec
		for i := range n {
			specs = append(specs, clusterSpec{name: fmt.Sprintf("c%d", i+1), start: start(rng.IntN(4)), faults: randomFaults(rng)})
		}
		onFailure := engine.Rollback
		if rng.IntN(3) == 0 {
			onFailure = engine.Halt
		}
		updateLimit, maxFailures := fmt.Sprint(1+rng.IntN(3)), fmt.Sprint(rng.IntN(3))
		bake := time.Duration(rng.IntN(2)) * 50 * time.Millisecond
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel() // each run is its own bubble, on its own fakes
			synctest.Test(t, func(t *testing.T) {
				policy := testPolicy(t, updateLimit, maxFailures, onFailure)
				policy.BakeTime = bake
				e := newEnv(t, policy, specs)
				e.run()
				if t.Failed() {
					for _, s := range specs {
						t.Logf("%s starts %s with faults %+v", s.name, s.start, s.faults)
					}
					t.Logf("update_limit %s, max_failures %s, on_failure %s, bake %s", updateLimit, maxFailures, onFailure, bake)
				}
			})
		})
	}
}

func randomFaults(rng *rand.Rand) faults {
	var f faults
	switch rng.IntN(13) {
	case 0:
		f.neverReady = true
	case 1:
		f.unreachableVerify = true
	case 2:
		f.goneAtApply = true
	case 3:
		f.goneAtWave = true
	case 4:
		f.recordsDown = true
	case 5:
		f.applyErr = errAdmission
	case 6:
		f.applyErr = errRBAC
	case 7:
		f.applyErr = errConflict
	case 8:
		f.sickBefore = true
	case 9:
		f.sickAfter, f.gateUnread = true, rng.IntN(3) == 0
	case 10:
		f.churnAfter = true
	}
	if f.counted() && rng.IntN(3) == 0 {
		f.restoreBroken = true
	}
	if rng.IntN(4) == 0 {
		f.throttle = 1 + rng.IntN(2)
	}
	return f
}

// seed puts obj on cluster name as made by someone else (managers) before the run.
func (e *env) seed(name string, obj *unstructured.Unstructured, managers ...string) {
	c := e.clusters[name]
	c.seedForeign(obj, managers...)
	e.initial[name] = snapshot{records: e.describeRecords(c), live: c.describeLive()}
}

// foreignConfig is web-config as someone else made it before any rollout: other data than
// either revision's.
func foreignConfig(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	set, err := manifest.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config, namespace: demo}\ndata: {color: red, owner: kubectl}\n")
	if err != nil {
		t.Fatal(err)
	}
	return set.Objects[0]
}

// TestWorldAdoption: an object of the bundle that someone else made before the rollout is
// recorded adopted before the first apply, and is never deleted: a failed first revision puts
// it back as it was, a destroy gives it back as the rollout left it, and the outcome says so.
func TestWorldAdoption(t *testing.T) {
	t.Run("failed first revision: the adopted object is put back, the others deleted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startFresh, faults{neverReady: true}}})
			before := foreignConfig(t)
			e.seed("c1", before, "kubectl-client-side-apply")
			r := e.run() // the invariants: c1 runs nothing of the rollout, web-config as it was
			c := e.clusters["c1"]
			if o, _ := r.res.Outcome("c1"); o.Status != engine.StatusFailed {
				t.Fatalf("c1 ended %s, want failed", o.Status)
			}
			if slices.Contains(c.deleted, "/ConfigMap/demo/web-config") || !slices.Equal(c.reverted, []string{"/ConfigMap/demo/web-config"}) {
				t.Errorf("deleted %v, reverted %v: want web-config reverted, never deleted", c.deleted, c.reverted)
			}
			if l := c.live["/ConfigMap/demo/web-config"]; l.ours {
				t.Errorf("web-config still carries our field manager after the restore")
			}
			st := e.load(c)
			adopted := st.AdoptedOf()
			if a, ok := adopted[apply.RefOf(before).Identity()]; !ok || !slices.Equal(a.Managers, []string{"kubectl-client-side-apply"}) || len(a.Saved) == 0 || len(adopted) != 1 {
				t.Errorf("records adopt %+v, want web-config alone, with its manager and saved content", adopted)
			}
			if len(r.notes) != 1 || !strings.Contains(r.notes[0], "c1: 1 object was adopted") || !strings.Contains(r.notes[0], "ConfigMap demo/web-config") {
				t.Errorf("notes %q do not say web-config was adopted and left in place", r.notes)
			}

		})
	})
	t.Run("failed revision adopting an object: restored to the backup, the object put back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{neverReady: true}}})
			set, err := manifest.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: demo}\ndata: {mine: \"yes\"}\n")
			if err != nil {
				t.Fatal(err)
			}
			e.seed("c1", set.Objects[0], "kubectl-create")
			r := e.run() // the invariants: c1 runs the old revision, and extra as it was made
			c := e.clusters["c1"]
			if o, _ := r.res.Outcome("c1"); o.Status != engine.StatusFailed {
				t.Fatalf("c1 ended %s, want failed", o.Status)
			}
			if slices.Contains(c.deleted, "/ConfigMap/demo/extra") || !slices.Equal(c.reverted, []string{"/ConfigMap/demo/extra"}) {
				t.Errorf("deleted %v, reverted %v: want extra reverted, never deleted", c.deleted, c.reverted)
			}
		})
	})
	t.Run("destroy after a good revision: the adopted object stays as applied, given back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startFresh, faults{}}})
			before := foreignConfig(t)
			e.seed("c1", before, "helm")
			r := e.run()
			c := e.clusters["c1"]
			if o, _ := r.res.Outcome("c1"); o.Status != engine.StatusSucceeded {
				t.Fatalf("c1 ended %s, want succeeded", o.Status)
			}
			if a := e.load(c).AdoptedOf()[apply.RefOf(before).Identity()]; !strings.Contains(string(a.Saved), `"red"`) {
				t.Errorf("the record saved %s, want the content from before the rollout", a.Saved)
			}
			if len(r.notes) != 0 {
				t.Errorf("notes %q, want none: nothing was given back", r.notes)
			}
			c.destroying = true
			// Destroy: web-config stays, as the rollout left it, given back; the rest goes.
			c.reverted, c.deleted = nil, nil
			note, err := e.svc.destroyCluster(context.Background(), e.spec, "c1", false)
			if err != nil {
				t.Fatal(err)
			}
			l, ok := c.live["/ConfigMap/demo/web-config"]
			if !ok || l.ours || objJSON(l.obj) != objJSON(e.desiredObject("ConfigMap", "web-config")) || len(c.reverted) != 0 {
				t.Errorf("after destroy web-config is %+v (there %v): want it kept as the rollout applied it, given back", l, ok)
			}
			if want := []string{"/ConfigMap/demo/extra", "apps/Deployment/demo/web"}; !slices.Equal(sorted(c.deleted), want) {
				t.Errorf("destroy deleted %v, want %v", c.deleted, want)
			}
			if !strings.Contains(note, "c1: 1 object was adopted") || !strings.Contains(note, "left in place") {
				t.Errorf("destroy note %q does not say web-config was left in place", note)
			}
			if st := e.load(c); st.Current != nil || len(st.Invalid) != 0 {
				t.Errorf("records after destroy: %s, want none", describeState(st))
			}
		})
	})
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
}

// An object the new revision drops that someone else took over is kept by prune, and the run's
// outcome says so (RunResult.Kept), once per cluster however often the apply was attempted.
func TestWorldReportsWhatPruneKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}})
		c := e.clusters["c1"]
		l := c.live["/ConfigMap/demo/legacy"]
		l.ours, l.foreign = false, []string{"kubectl-edit"}
		c.live["/ConfigMap/demo/legacy"] = l
		r := e.run()
		if o, _ := r.res.Outcome("c1"); o.Status != engine.StatusSucceeded {
			t.Fatalf("c1 ended %s, want succeeded", o.Status)
		}
		if _, ok := c.live["/ConfigMap/demo/legacy"]; !ok {
			t.Fatal("legacy was deleted although another manager took it over")
		}
		if len(r.kept) != 1 || !strings.HasPrefix(r.kept[0], "c1: ") || !strings.Contains(r.kept[0], "legacy") || !strings.Contains(r.kept[0], "managed by others") {
			t.Errorf("kept %q, want legacy on c1 with the reason", r.kept)
		}
	})
}
