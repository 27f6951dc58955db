package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// fenceWorld loses the run's Lease right after the first Apply returns: from then on the fence
// refuses and the run's context is cancelled with the loss as its cause, as HoldLease's are.
type fenceWorld struct {
	engine.World
	lost   atomic.Bool
	cancel context.CancelCauseFunc
	after  func() // snapshots the clusters at the moment of the loss
	calls  atomic.Int32
}

var errTestLeaseLost = fmt.Errorf("%w: taken over by another apply (test)", records.ErrLeaseLost)

func (f *fenceWorld) fence() error {
	if f.lost.Load() {
		return errTestLeaseLost
	}
	return nil
}

func (f *fenceWorld) Apply(ctx context.Context, target, revision string) error {
	err := f.World.Apply(ctx, target, revision)
	if !f.lost.Swap(true) {
		f.after()
		f.cancel(errTestLeaseLost)
	}
	return err
}

func (f *fenceWorld) Restore(ctx context.Context, target, revision string) error {
	f.calls.Add(1)
	return f.World.Restore(ctx, target, revision)
}

// targetsNow reads every cluster's records as a plan would, for engine.PlanRollout.
func (e *env) targetsNow(ctx context.Context) []engine.Target {
	var targets []engine.Target
	for _, name := range e.names {
		rec, _, err := observeOne(ctx, e.svc, e.spec, name)
		if err != nil {
			e.t.Fatal(err)
		}
		targets = append(targets, engine.Target{Name: name, Record: rec})
	}
	return targets
}

// fencedRunParts is what a run the fence tests cut off starts from: its plan, the management
// store of its progress record, and the progress writer.
func (e *env) fencedRunParts(ctx context.Context) (engine.Plan, *records.ManagementStore, *progressWriter) {
	plan := engine.PlanRollout(e.targetsNow(ctx), e.spec.Revision, e.spec.Policy)
	pstore := records.NewManagementStore(e.progressClient, e.spec.RecordNamespace)
	progress := &progressWriter{store: pstore, key: e.spec.Key, progress: records.Progress{
		Phase: records.PhaseRunning, Revision: e.spec.Revision, Waves: len(plan.Waves), Clusters: map[string]records.ClusterOutcome{},
	}}
	return plan, pstore, progress
}

// A run that loses its Lease writes nothing more: not the restore a cancelled run settles its
// cluster in flight with, not a record, not the progress record. The cluster is left as the
// loss found it (recorded provisioning, for whoever holds the Lease now), and the clusters of
// later waves are never touched.
func TestLeaseLostMidWaveWritesNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}, {"c3", startOld, faults{}}})
		ctx := context.Background()
		plan, pstore, progress := e.fencedRunParts(ctx)
		progress.save(ctx)

		runCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		fw := &fenceWorld{cancel: cancel}
		runCtx = records.WithFence(runCtx, fw.fence)
		fwWorld := &world{svc: e.svc, spec: e.spec, progress: progress, logf: e.logf}
		fwWorld.engine = fwWorld.svc.engine.run(fwWorld)
		fw.World = fwWorld
		seen := map[string]string{}
		var progressAtLoss string
		fw.after = func() {
			for name, c := range e.clusters {
				seen[name] = e.describeRecords(c) + "\n" + c.describeLive()
			}
			p, _ := pstore.LoadProgress(ctx, e.spec.Key)
			progressAtLoss = fmt.Sprint(p)
		}
		res := engine.Execute(runCtx, plan, fw, e.svc.clock, e.spec.Policy)
		progress.finish(runCtx, &res)
		synctest.Wait()

		for name, c := range e.clusters {
			if now := e.describeRecords(c) + "\n" + c.describeLive(); now != seen[name] {
				t.Errorf("%s changed after the Lease was lost:\nthen %s\nnow  %s", name, seen[name], now)
			}
		}
		if p, _ := pstore.LoadProgress(ctx, e.spec.Key); fmt.Sprint(p) != progressAtLoss {
			t.Errorf("the progress record was written after the Lease was lost")
		}
		if n := fw.calls.Load(); n > 0 {
			// The engine may ask; the World must refuse before it writes (checked above).
			t.Logf("restore asked %d time(s) after the loss, refused by the fence", n)
		}
		o, _ := res.Outcome("c1")
		if !o.Unsettled || o.Invalid || o.Failed {
			t.Errorf("c1: %+v, want left in flight, not counted, not invalid", o)
		}
		for _, name := range []string{"c2", "c3"} {
			if o, _ := res.Outcome(name); o.Status != engine.StatusNotStarted {
				t.Errorf("%s: %s, want not started", name, o.Status)
			}
		}
		if !res.Cancelled || !errors.Is(context.Cause(runCtx), records.ErrLeaseLost) {
			t.Errorf("cancelled %v, cause %v", res.Cancelled, context.Cause(runCtx))
		}
	})
}

// The fence is read from the context, and a context outside a run has none.
func TestFencedReadsTheRunsFence(t *testing.T) {
	if err := records.Fenced(context.Background()); err != nil {
		t.Fatalf("no run: %v", err)
	}
	ctx := records.WithFence(context.Background(), func() error { return errTestLeaseLost })
	if err := records.Fenced(context.WithoutCancel(ctx)); !errors.Is(err, records.ErrLeaseLost) {
		t.Fatalf("a settling context derived from the run's: %v", err)
	}
	w := &world{svc: &Service{engine: directEngine{}, retryWait: 1, clock: engine.SystemClock{}}, logf: func(string, map[string]any) {}}
	w.engine = w.svc.engine.run(w)
	called := false
	if err := w.retry(ctx, "c1", func(context.Context) error { called = true; return nil }); !errors.Is(err, records.ErrLeaseLost) || called {
		t.Fatalf("retry after the loss: err %v, op called %v", err, called)
	}
}

// verdictFenceWorld loses the run's Lease at the moment a cluster's verify reports the
// revision's failure (the management cluster paused past lease_duration as a Deployment reports
// ProgressDeadlineExceeded): the run is cancelled and the fence refuses every write after it.
type verdictFenceWorld struct {
	engine.World
	lost   atomic.Bool
	cancel context.CancelCauseFunc
}

func (f *verdictFenceWorld) fence() error {
	if f.lost.Load() {
		return errTestLeaseLost
	}
	return nil
}

func (f *verdictFenceWorld) Verify(ctx context.Context, target, revision string) error {
	err := f.World.Verify(ctx, target, revision)
	if errors.Is(err, engine.ErrRevisionFailed) && !f.lost.Swap(true) {
		f.cancel(errTestLeaseLost)
	}
	return err
}

// A verdict, once seen, is never lost: the revision's failure seen as the Lease lapses is kept
// in the failing cluster's own records, though nothing else is written after the loss (no
// ledger entry, no restore, no progress), and the next plan refuses the revision there, naming
// the cluster and the evidence.
func TestLeaseLostAsTheRevisionFailsKeepsTheVerdict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{neverReady: true}}, {"c2", startOld, faults{}}})
		ctx := context.Background()
		plan, _, progress := e.fencedRunParts(ctx)
		runCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		fw := &verdictFenceWorld{cancel: cancel}
		runCtx = records.WithFence(runCtx, fw.fence)
		fwWorld := &world{svc: e.svc, spec: e.spec, progress: progress, logf: e.logf}
		fwWorld.engine = fwWorld.svc.engine.run(fwWorld)
		fw.World = fwWorld
		res := engine.Execute(runCtx, plan, fw, e.svc.clock, e.spec.Policy)
		progress.finish(runCtx, &res)
		synctest.Wait()
		if !fw.lost.Load() {
			t.Fatal("the revision never failed: the test proves nothing")
		}
		if reason, ok := e.load(e.clusters["c1"]).InvalidReason(e.spec.Revision); !ok || reason == "" {
			t.Fatalf("c1's records: %s; want %s marked invalid with the evidence", e.describeRecords(e.clusters["c1"]), e.spec.Revision)
		}
		ledger, err := records.NewManagementStore(e.mgmt, e.spec.RecordNamespace).Ledger(ctx, e.spec.Key)
		if err != nil || len(ledger) != 0 {
			t.Fatalf("ledger %+v, %v: want nothing written after the loss", ledger, err)
		}
		if o, _ := res.Outcome("c2"); o.Status != engine.StatusNotStarted {
			t.Errorf("c2: %s, want not started", o.Status)
		}
		// The next plan: the cluster's record holds the failure the ledger lacks.
		refused := withClusterFailures(nil, e.targetsNow(ctx))
		if len(refused) != 1 || refused[0].Revision != e.spec.Revision || len(refused[0].Clusters) != 1 || refused[0].Clusters[0] != "c1" ||
			!strings.Contains(refused[0].Reason, "verify") || !strings.Contains(refused[0].Reason, "(seen 20") {
			t.Fatalf("the next plan refuses %+v; want %s, on c1, with the evidence and when it was seen", refused, e.spec.Revision)
		}
		// The next apply, holding the Lease, writes it to the ledger and refuses the revision.
		if _, err := e.svc.Run(ctx, RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}}); err == nil {
			t.Fatal("the next apply took the revision that failed")
		}
		ledger, err = records.NewManagementStore(e.mgmt, e.spec.RecordNamespace).Ledger(ctx, e.spec.Key)
		if err != nil || len(ledger) != 1 || ledger[0].Revision != e.spec.Revision || strings.Join(ledger[0].Clusters, ",") != "c1" ||
			strings.Contains(ledger[0].Reason, fromClustersNote) {
			t.Fatalf("ledger after the next apply: %+v, %v; want %s on c1 with the cluster's evidence", ledger, err, e.spec.Revision)
		}
	})
}
