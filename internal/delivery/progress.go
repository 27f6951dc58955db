package delivery

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// ProgressInterval is the least time between two writes of a run's progress record, except
// that the start, every batch boundary (a wave starting or done) and the end are always written
// at once. Changes in between are written together, at most ProgressInterval after the last
// write: a wave of a hundred clusters costs a few writes, not hundreds.
const ProgressInterval = time.Second

// progressTimeout bounds a delayed progress write, which runs after the event that caused it.
const progressTimeout = 10 * time.Second

// progressWriter keeps the management cluster's progress record in step with the run,
// debounced (see ProgressInterval).
type progressWriter struct {
	store *records.ManagementStore
	key   records.Key
	// clock paces the writes; the wall clock when nil.
	clock engine.Clock

	mu       sync.Mutex
	progress records.Progress
	batch    []string  // targets of the batch in progress
	written  time.Time // when the record was last written (zero: never)
	dirty    bool      // changes not written yet
	pending  bool      // a delayed write is scheduled
	closed   bool      // finish ran: no more delayed writes
	stop     context.CancelFunc
	stopCtx  context.Context
}

func (p *progressWriter) observe(ctx context.Context, ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case ev.Kind == engine.EventBatchStarted:
		p.batch = ev.Targets
		if ev.Phase != engine.PhaseWave {
			return
		}
		p.progress.Wave = ev.Batch
		p.saveLocked(ctx)
	case ev.Kind == engine.EventBatchDone:
		if p.dirty {
			p.saveLocked(ctx)
		}
	case ev.Target != "":
		o := p.progress.Clusters[ev.Target]
		if ev.Kind == engine.EventProvisioning {
			o.StartedAt = ev.At
		}
		if ev.Kind == engine.EventRestoreFailed && o.State == string(engine.EventRollingBack) {
			// Still rolling back: the next run completes the rollback (see rollingBack).
			o.Reason = ev.Reason
		} else {
			o.Revision, o.State, o.Reason = ev.Revision, string(ev.Kind), ev.Reason
		}
		if ev.Kind != engine.EventProvisioning && ev.Kind != engine.EventRollingBack {
			o.FinishedAt = ev.At
		}
		p.progress.Clusters[ev.Target] = o
		p.saveSoonLocked(ctx)
	}
}

// summary says how the targets of a batch ended, e.g. "prod-eu-1 succeeded, prod-us-1 failed".
// Without targets (the engine does not always repeat them) it covers the batch just started.
func (p *progressWriter) summary(targets []string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(targets) == 0 {
		targets = p.batch
	}
	parts := make([]string, 0, len(targets))
	for _, t := range targets {
		parts = append(parts, t+" "+p.progress.Clusters[t].State)
	}
	return strings.Join(parts, ", ")
}

// save writes the record now.
func (p *progressWriter) save(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.saveLocked(ctx)
}

func (p *progressWriter) now() time.Time {
	if p.clock == nil {
		return time.Now()
	}
	return p.clock.Now()
}

func (p *progressWriter) saveLocked(ctx context.Context) {
	// Progress is informational: the workload records are what resumes a run, so a failed
	// write here does not stop the rollout.
	p.progress.UpdatedAt = time.Time{}
	_ = p.store.SaveProgress(ctx, p.key, p.progress)
	p.written, p.dirty = p.now(), false
}

// saveSoonLocked writes the record now if the last write is ProgressInterval old, else
// schedules one for when it will be.
func (p *progressWriter) saveSoonLocked(ctx context.Context) {
	now := p.now()
	if p.written.IsZero() || now.Sub(p.written) >= ProgressInterval {
		p.saveLocked(ctx)
		return
	}
	p.dirty = true
	if p.pending || p.closed {
		return
	}
	p.pending = true
	if p.stopCtx == nil {
		p.stopCtx, p.stop = context.WithCancel(context.WithoutCancel(ctx))
	}
	wait := p.written.Add(ProgressInterval).Sub(now)
	var clock engine.Clock = engine.SystemClock{}
	if p.clock != nil {
		clock = p.clock
	}
	go func() {
		if err := clock.Sleep(p.stopCtx, wait); err != nil {
			return // finished: finish wrote the record
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.pending = false
		if p.dirty && !p.closed {
			wctx, cancel := context.WithTimeout(p.stopCtx, progressTimeout)
			defer cancel()
			p.saveLocked(wctx)
		}
	}()
}

func (p *progressWriter) finish(ctx context.Context, r *engine.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.stop != nil {
		p.stop()
	}
	switch {
	case r.Cancelled:
		p.progress.Phase = records.PhaseInterrupted
	case r.Err() != nil:
		p.progress.Phase = records.PhaseFailed
	default:
		p.progress.Phase = records.PhaseSucceeded
	}
	for _, o := range r.Outcomes {
		c := p.progress.Clusters[o.Target]
		if c.State == string(engine.EventRollingBack) && o.Unsettled {
			c.Reason = o.Error // keep it rolling back, for the next run to complete
		} else {
			c.Revision, c.State, c.Reason = o.Revision, string(o.Status), o.Error
		}
		if !o.Started.IsZero() {
			c.StartedAt, c.FinishedAt = o.Started, o.Finished
		}
		p.progress.Clusters[o.Target] = c
	}
	p.saveLocked(ctx)
}
