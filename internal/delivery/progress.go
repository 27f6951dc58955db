package delivery

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// progressWriter keeps the management cluster's progress record in step with the run.
type progressWriter struct {
	store    *records.ManagementStore
	key      records.Key
	mu       sync.Mutex
	progress records.Progress
	batch    []string // targets of the batch in progress
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
	default:
		return
	}
	p.saveLocked(ctx)
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

func (p *progressWriter) save(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.saveLocked(ctx)
}

func (p *progressWriter) saveLocked(ctx context.Context) {
	// Progress is informational: the workload records are what resumes a run, so a failed
	// write here does not stop the rollout.
	p.progress.UpdatedAt = time.Time{}
	_ = p.store.SaveProgress(ctx, p.key, p.progress)
}

func (p *progressWriter) finish(ctx context.Context, r *engine.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
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
