package delivery

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// progressFixture is a progressWriter over a fake management cluster that counts the writes
// of the progress record. It runs in a synctest bubble: time is virtual, and the fixture waits
// for the writer's background writes with synctest.Wait rather than with real sleeps (which
// made the counts flaky on a loaded machine).
type progressFixture struct {
	t      *testing.T
	p      *progressWriter
	store  *records.ManagementStore
	writes atomic.Int32
}

func newProgressFixture(t *testing.T) *progressFixture {
	f := &progressFixture{t: t}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: "rollout", Namespace: "fleet", Name: "ingress"}
	count := func(obj client.Object) {
		if obj.GetName() == key.ObjectName() {
			f.writes.Add(1)
		}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count(obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count(obj)
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	f.store = records.NewManagementStore(c, "")
	f.p = &progressWriter{store: f.store, key: key, clock: engine.SystemClock{}, progress: records.Progress{
		Phase: records.PhaseRunning, Revision: "aaa", Waves: 2, Clusters: map[string]records.ClusterOutcome{},
	}}
	return f
}

// TestProgressWritesOfALargeRecordAreRarer: a record of 1,000 clusters is written at most every
// 10 s between batch boundaries (each write costs the whole record), and a boundary is still
// written at once.
func TestProgressWritesOfALargeRecordAreRarer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newProgressFixture(t)
		for i := range 1000 {
			f.p.progress.Clusters[fmt.Sprintf("c%d", i)] = records.ClusterOutcome{State: "pending"}
		}
		f.p.save(t.Context())
		f.batch(engine.EventBatchStarted, 1, "c0")
		f.wantWrites(2)
		// An event every 100 ms for 30 s: about three writes, not thirty.
		if got := f.stream("c", 300); got < 2 || got > 4 {
			t.Fatalf("%d writes for 30 s of events on a record of 1,000 clusters, want about 3 (one every 10 s)", got)
		}
		before := f.writes.Load()
		f.target(engine.EventSucceeded, "c0") // within 10 s of the last write: held back
		f.wantWrites(before)
		f.batch(engine.EventBatchDone, 1, "c0")
		f.wantWrites(before + 1)
		f.advance(10 * time.Second) // the write still scheduled finds nothing left to write
		f.wantWrites(before + 1)
	})
}

func (f *progressFixture) target(kind engine.EventKind, target string) {
	f.p.observe(f.t.Context(), engine.Event{Kind: kind, Target: target, Revision: "aaa", At: time.Now()})
}

func (f *progressFixture) batch(kind engine.EventKind, n int, targets ...string) {
	f.p.observe(f.t.Context(), engine.Event{Kind: kind, Phase: engine.PhaseWave, Batch: n, Batches: 2, Targets: targets})
}

// stream makes n clusters (prefix0, prefix1, …) start, one every 100 ms, and returns how many
// times the record was written meanwhile. Writes run outside the writer's lock and a copy older
// than one already written is dropped, so the count settles a moment after the last event and
// may be a little under one per interval.
func (f *progressFixture) stream(prefix string, n int) int32 {
	before := f.writes.Load()
	for i := range n {
		f.target(engine.EventProvisioning, fmt.Sprintf("%s%d", prefix, i))
		f.advance(100 * time.Millisecond)
	}
	f.settle()
	return f.writes.Load() - before
}

// settle waits until the writer's background writes are done.
func (f *progressFixture) settle() { synctest.Wait() }

// wantWrites checks, once the background writes are done, that the record was written n times.
func (f *progressFixture) wantWrites(n int32) {
	f.t.Helper()
	synctest.Wait()
	if got := f.writes.Load(); got != n {
		f.t.Fatalf("%d writes of the progress record, want %d", got, n)
	}
}

// advance moves the bubble's clock by d, once everything waiting has settled.
func (f *progressFixture) advance(d time.Duration) {
	synctest.Wait()
	time.Sleep(d)
	synctest.Wait()
}

func (f *progressFixture) state(target string) string {
	f.t.Helper()
	p, err := f.store.LoadProgress(f.t.Context(), f.p.key)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Clusters[target].State
}

// Progress writes are debounced: at most one per ProgressInterval, the changes in between
// written together at the end of the interval; the start, batch boundaries and the end are
// written at once.
func TestProgressWritesDebounced(t *testing.T) { synctest.Test(t, testProgressWritesDebounced) }

func testProgressWritesDebounced(t *testing.T) {
	f := newProgressFixture(t)
	f.p.save(t.Context())
	f.wantWrites(1)
	f.batch(engine.EventBatchStarted, 1, "a", "b", "c")
	f.wantWrites(2)

	// Three clusters start at once: one write, a second later.
	for _, c := range []string{"a", "b", "c"} {
		f.target(engine.EventProvisioning, c)
	}
	f.wantWrites(2)
	f.advance(ProgressInterval - time.Millisecond)
	f.wantWrites(2)
	f.advance(time.Millisecond)
	f.wantWrites(3)
	if got := f.state("c"); got != "provisioning" {
		t.Fatalf("c is %q in the record", got)
	}

	// A wave ends: what changed is written at once, and the delayed write finds nothing to do.
	f.target(engine.EventSucceeded, "a")
	f.target(engine.EventSucceeded, "b")
	f.target(engine.EventFailed, "c")
	f.wantWrites(3)
	f.batch(engine.EventBatchDone, 1, "a", "b", "c")
	f.wantWrites(4)
	if got := f.state("c"); got != "failed" {
		t.Fatalf("c is %q in the record after the wave", got)
	}
	f.advance(ProgressInterval)
	f.wantWrites(4)

	// A steady stream of events, one every 100 ms for 10 s: about one write a second.
	f.batch(engine.EventBatchStarted, 2, "d")
	f.wantWrites(5)
	if got := f.stream("d", 100); got < 5 || got > 11 {
		t.Fatalf("%d writes for 10 s of events, want about 10 (at most one a second)", got)
	}

	// The end is written at once, and no delayed write follows it.
	f.target(engine.EventSucceeded, "d")
	before := f.writes.Load()
	f.p.finish(t.Context(), &engine.Result{})
	f.wantWrites(before + 1)
	f.advance(time.Minute)
	f.wantWrites(before + 1)
	p, err := f.store.LoadProgress(t.Context(), f.p.key)
	if err != nil || p.Phase != records.PhaseSucceeded || p.Clusters["d"].State != "succeeded" {
		t.Fatalf("final record %+v, %v", p, err)
	}
}

// TestLostContactWrittenBeforeAnythingElse: the moment a run loses contact with a cluster after
// its change began, the progress record says so, without waiting for the debounced write: a
// process killed (kill -9) right then, before the cluster's restore and before the next wave,
// leaves a record whose gate stops the next run of the revision.
func TestLostContactWrittenBeforeAnythingElse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newProgressFixture(t)
		f.p.save(t.Context())
		f.batch(engine.EventBatchStarted, 1, "c1")
		f.target(engine.EventProvisioning, "c1") // written with the next debounced write, or never
		f.p.observe(t.Context(), engine.Event{Kind: engine.EventUnsettled, Target: "c1", Revision: "aaa", At: time.Now(),
			Reason: "verify: the cluster did not answer"})
		// Killed here: no finish, no background write let run.
		p, err := f.store.LoadProgress(t.Context(), f.p.key)
		if err != nil {
			t.Fatal(err)
		}
		if p.LostContact["c1"] != "verify: the cluster did not answer" {
			t.Fatalf("progress record's lost contact = %v, want c1 with its reason, written at once", p.LostContact)
		}
		gate := lostContactGate(p)
		if gate["c1"] == "" {
			t.Fatalf("gate = %v, want it to hold on c1 (the run stopped at wave %d of %d)", gate, p.Wave, p.Waves)
		}
		obs := &Observation{LostContact: gate, LostContactRevision: p.Revision}
		if err := obs.LostContactRefusal("aaa", "rollout fleet/ingress", false); err == nil {
			t.Fatal("the next run of the revision is not refused")
		}
		// A restore that follows does not erase it.
		f.p.observe(t.Context(), engine.Event{Kind: engine.EventRestored, Target: "c1", Revision: "zzz", At: time.Now()})
		f.settle()
		f.advance(2 * time.Second)
		if p, _ := f.store.LoadProgress(t.Context(), f.p.key); p.LostContact["c1"] == "" {
			t.Fatalf("the restore erased the lost contact: %v", p.LostContact)
		}
	})
}

func TestLostContactGate(t *testing.T) {
	lost := map[string]string{"c1": "verify: no answer"}
	tests := []struct {
		name string
		p    records.Progress
		want bool
	}{
		{"killed mid-run before its last wave", records.Progress{Phase: records.PhaseRunning, Wave: 1, Waves: 3, LostContact: lost}, true},
		{"cancelled before its last wave", records.Progress{Phase: records.PhaseInterrupted, Wave: 2, Waves: 3, LostContact: lost}, true},
		{"killed in its last wave: nothing further to take", records.Progress{Phase: records.PhaseRunning, Wave: 3, Waves: 3, LostContact: lost}, false},
		{"halted on it", records.Progress{Phase: records.PhaseFailed, Wave: 1, Waves: 2, Clusters: map[string]records.ClusterOutcome{
			"c1": {State: string(engine.StatusLostContact), Reason: "verify: no answer"}, "c2": {State: string(engine.StatusNotStarted)}}}, true},
		{"went on past it within max_unsettled", records.Progress{Phase: records.PhaseFailed, Wave: 2, Waves: 2, LostContact: lost, Clusters: map[string]records.ClusterOutcome{
			"c1": {State: string(engine.StatusLostContact)}, "c2": {State: string(engine.StatusSucceeded)}}}, false},
		{"the cluster left since", records.Progress{Phase: records.PhaseRunning, Wave: 1, Waves: 3, LostContact: lost, Clusters: map[string]records.ClusterOutcome{
			"c1": {State: string(engine.StatusGone)}}}, false},
		{"no contact lost", records.Progress{Phase: records.PhaseRunning, Wave: 1, Waves: 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lostContactGate(&tt.p); (got["c1"] != "") != tt.want {
				t.Errorf("lostContactGate = %v, want holding on c1: %v", got, tt.want)
			}
		})
	}
}

// TestProgressWritesOutliveCancelBounded: a run cancelled while a write is delayed still gets
// it written, and the context those writes run on ends progressOutlivesCancel after the run's.
func TestProgressWritesOutliveCancelBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newProgressFixture(t)
		ctx, cancel := context.WithCancel(t.Context())
		f.p.save(ctx)
		f.wantWrites(1)
		f.p.observe(ctx, engine.Event{Kind: engine.EventProvisioning, Target: "a", Revision: "aaa", At: time.Now()})
		f.wantWrites(1)
		cancel()
		f.advance(ProgressInterval)
		f.wantWrites(2)
		f.advance(progressOutlivesCancel - ProgressInterval - time.Nanosecond)
		if f.p.stopCtx.Err() != nil {
			t.Fatal("the delayed writes' context ended before its bound")
		}
		f.advance(time.Nanosecond)
		if f.p.stopCtx.Err() == nil {
			t.Fatalf("the delayed writes' context outlives the run's by more than %s", progressOutlivesCancel)
		}
	})
}
