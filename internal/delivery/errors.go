package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The engine acts on an error by its class (engine.ErrRevisionFailed, ErrChangeRefused,
// ErrTargetGone; anything else leaves the cluster unsettled). blame.Of decides the class, by the
// rules in the blame package (and ARCHITECTURE.md, "Blame"); what only delivery can add is
// whether a cluster that failed has left the fleet.

// goneCheckTimeout bounds the management cluster reads that decide whether a cluster that
// failed has left the fleet.
const goneCheckTimeout = 10 * time.Second

// classify marks err, returned while working on target, with its engine class. An error that
// is not the revision's is checked against the management cluster: a Cluster (or its
// kubeconfig Secret) deleted mid-rollout makes the target gone.
func (w *world) classify(ctx context.Context, target string, err error) error {
	if err == nil || blame.IsSettled(err) {
		return blame.Mark(err)
	}
	// Outlives cancellation: a cancelled run still tells a cluster that left from one that failed.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), goneCheckTimeout)
	defer cancel()
	if reason, gerr := w.svc.goneOf(gctx, w.spec.ClusterNamespace, target); gerr == nil && reason != "" {
		return engine.Mark(engine.ErrTargetGone, fmt.Errorf("%s (%w)", reason, err))
	}
	return err
}

// maxRetryWait caps the wait between retries of an infrastructure failure.
const maxRetryWait = 15 * time.Second

// retry runs op until it succeeds, fails for a reason other than the infrastructure (the
// revision, a refused change, a vanished cluster), or ctx ends; infrastructure failures are
// retried with exponential backoff. It returns op's last error, classified.
func (w *world) retry(ctx context.Context, target string, op func(ctx context.Context) error) error {
	wait := w.svc.retryWait
	for {
		if err := records.Fenced(ctx); err != nil {
			return err // the Lease is lost: nothing more is written, and waiting will not win it back
		}
		err := w.classify(ctx, target, redact(op(ctx), w.spec.Redact))
		if err == nil || blame.IsSettled(err) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		w.logf(fmt.Sprintf("%s: %v; retrying in %s", target, firstLine(err.Error()), wait), map[string]any{"cluster": target})
		if serr := w.svc.clock.Sleep(ctx, wait); serr != nil {
			return err
		}
		wait = min(2*wait, maxRetryWait)
	}
}
