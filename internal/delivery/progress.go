package delivery

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// ProgressInterval is the least time between two writes of a run's progress record (longer for
// a record of more than 100 clusters: progressIntervalPerCluster), except that the start, every
// batch boundary (a wave starting or done) and the end are always written at once. Changes in
// between are written together, at most that long after the last write: a wave of a hundred
// clusters costs a few writes, not hundreds.
const ProgressInterval = time.Second

// progressIntervalPerCluster lengthens that least time for a large record: every write reads,
// encodes and compresses the whole record (each cluster's outcome), so at a fixed interval its
// cost per cluster grew with the fleet. At this much per cluster it stays flat: a record of
// 1,000 clusters is written at most every 10 s between batch boundaries, one of 100 or fewer
// every second. (make bench, 1,000 Clusters through Flux: the writes at one a second were an
// eighth of the provider's CPU.)
const progressIntervalPerCluster = 10 * time.Millisecond

// progressTimeout bounds a delayed progress write, which runs after the event that caused it.
const progressTimeout = 10 * time.Second

// progressOutlivesCancel bounds how long delayed progress writes go on after the run's context
// is done, unless finish stops them first (as it always does). A cancelled run settles within
// minutes (restores within the engine's rollback timeout of 10 minutes, records within
// SettleTimeout): an hour is generous; finish writes the record itself in any case.
const progressOutlivesCancel = time.Hour

// progressWriter keeps the management cluster's progress record in step with the run,
// debounced (see ProgressInterval).
type progressWriter struct {
	store *records.ManagementStore
	key   records.Key
	// clock paces the writes; the wall clock when nil.
	clock engine.Clock

	// mu guards the fields below; it is never held while writing to the management cluster,
	// so that a slow or contended management API does not stall the records of every cluster
	// in the wave (each Record call passes through observe). Writes take copies and go through
	// writeMu, which drops a copy older than one already written.
	writeMu    sync.Mutex
	writtenSeq uint64 // sequence number of the last copy written; guarded by writeMu

	mu       sync.Mutex
	seq      uint64 // sequence number of the last copy taken
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
	var w *progressCopy
	switch {
	case ev.Kind == engine.EventBatchStarted:
		p.batch = ev.Targets
		if ev.Phase == engine.PhaseWave {
			p.progress.Wave = ev.Batch
			w = p.copyLocked()
		}
	case ev.Kind == engine.EventBatchDone:
		if p.dirty {
			w = p.copyLocked()
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
		if ev.Kind == engine.EventUnsettled {
			// Lost contact after the change began: the gate that stops the next run of this
			// revision. Written now, not with the next debounced write, so that it is in the
			// record before the cluster's restore and before the next wave.
			if p.progress.LostContact == nil {
				p.progress.LostContact = map[string]string{}
			}
			p.progress.LostContact[ev.Target] = ev.Reason
			w = p.copyLocked()
		} else {
			w = p.saveSoonLocked(ctx)
		}
	}
	p.mu.Unlock()
	p.write(ctx, w)
}

// progressCopy is the record as it stood when a write was decided, with its place in order.
type progressCopy struct {
	progress records.Progress
	seq      uint64
}

// copyLocked takes a copy of the record to write and marks it written.
func (p *progressWriter) copyLocked() *progressCopy {
	p.seq++
	c := &progressCopy{progress: p.progress, seq: p.seq}
	c.progress.Clusters = maps.Clone(p.progress.Clusters)
	c.progress.LostContact = maps.Clone(p.progress.LostContact)
	c.progress.UpdatedAt = time.Time{}
	p.written, p.dirty = p.now(), false
	return c
}

// write writes c (nil: nothing to write) unless a newer copy was written already. Progress is
// informational: the workload records are what resumes a run, so a failed write here does not
// stop the rollout.
func (p *progressWriter) write(ctx context.Context, c *progressCopy) {
	if c == nil {
		return
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if c.seq <= p.writtenSeq || records.Fenced(ctx) != nil {
		return
	}
	_ = p.store.SaveProgress(ctx, p.key, c.progress)
	p.writtenSeq = c.seq
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
	c := p.copyLocked()
	p.mu.Unlock()
	p.write(ctx, c)
}

// clk is the clock that paces the writes: p.clock, or the wall clock when nil.
func (p *progressWriter) clk() engine.Clock {
	if p.clock == nil {
		return engine.SystemClock{}
	}
	return p.clock
}

func (p *progressWriter) now() time.Time { return p.clk().Now() }

// intervalLocked is the least time between two delayed writes of the record as it is now.
func (p *progressWriter) intervalLocked() time.Duration {
	return max(ProgressInterval, time.Duration(len(p.progress.Clusters))*progressIntervalPerCluster)
}

// saveSoonLocked returns a copy to write now if the last write is intervalLocked old, else
// schedules a write for when it will be (and returns nil).
func (p *progressWriter) saveSoonLocked(ctx context.Context) *progressCopy {
	now := p.now()
	interval := p.intervalLocked()
	if p.written.IsZero() || now.Sub(p.written) >= interval {
		return p.copyLocked()
	}
	p.dirty = true
	if p.pending || p.closed {
		return nil
	}
	p.pending = true
	if p.stopCtx == nil {
		// Outlives cancellation: a cancelled run's delayed writes still land while it settles (bounded).
		p.stopCtx, p.stop = clock.Outlive(ctx, p.clk(), progressOutlivesCancel)
	}
	wait := p.written.Add(interval).Sub(now)
	clk := p.clk()
	stopCtx := p.stopCtx
	go func() {
		if err := clk.Sleep(stopCtx, wait); err != nil {
			return // finished: finish wrote the record
		}
		p.mu.Lock()
		p.pending = false
		var c *progressCopy
		if p.dirty && !p.closed {
			c = p.copyLocked()
		}
		p.mu.Unlock()
		wctx, cancel := context.WithTimeout(stopCtx, progressTimeout)
		defer cancel()
		p.write(wctx, c)
	}()
	return nil
}

func (p *progressWriter) finish(ctx context.Context, r *engine.Result) {
	p.mu.Lock()
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
	last := p.copyLocked()
	p.mu.Unlock()
	p.write(ctx, last)
}
