package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
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

// A run that loses its Lease writes nothing more: not the restore a cancelled run settles its
// cluster in flight with, not a record, not the progress record. The cluster is left as the
// loss found it (recorded provisioning, for whoever holds the Lease now), and the clusters of
// later waves are never touched.
func TestLeaseLostMidWaveWritesNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}, {"c3", startOld, faults{}}})
		ctx := context.Background()
		var targets []engine.Target
		for _, name := range e.names {
			rec, _, err := e.svc.observeCluster(ctx, e.spec.ClusterNamespace, name, e.spec.Key, e.spec.RecordNamespace, false, nil, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			targets = append(targets, engine.Target{Name: name, Record: rec})
		}
		plan := engine.PlanRollout(targets, e.spec.Revision, e.spec.Policy)
		pstore := records.NewManagementStore(e.progressClient, e.spec.RecordNamespace)
		progress := &progressWriter{store: pstore, key: e.spec.Key, progress: records.Progress{
			Phase: records.PhaseRunning, Revision: e.spec.Revision, Waves: len(plan.Waves), Clusters: map[string]records.ClusterOutcome{},
		}}
		progress.save(ctx)

		runCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		fw := &fenceWorld{cancel: cancel}
		runCtx = records.WithFence(runCtx, fw.fence)
		fw.World = &world{svc: e.svc, spec: e.spec, progress: progress, logf: e.logf}
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
	w := &world{svc: &Service{retryWait: 1, clock: engine.SystemClock{}}, logf: func(string, map[string]any) {}}
	called := false
	if err := w.retry(ctx, "c1", func(context.Context) error { called = true; return nil }); !errors.Is(err, records.ErrLeaseLost) || called {
		t.Fatalf("retry after the loss: err %v, op called %v", err, called)
	}
}
