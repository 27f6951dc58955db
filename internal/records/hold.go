package records

import (
	"context"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// releaseSettle bounds how long Hold's release gives the Leases back, also after the apply's
// context was cancelled: an interrupted apply should not leave the next one waiting for a
// Lease to expire, nor hang on a management cluster that stopped answering.
const releaseSettle = 10 * time.Second

// Hold is how an apply holds its Leases: it takes the Leases of keys for holder, in the order
// given (two applies that share keys meet at the first one they share, so neither holds what
// the other waits for; callers sort keys), with Acquire's waiting and takeover rules. A Lease
// another live holder keeps is Acquire's *HeldError, and nothing stays held.
//
// runCtx, derived from ctx, is what the apply runs on: it is cancelled when any of the Leases
// is lost (taken over, deleted, not renewed for its duration), with a cause wrapping
// ErrLeaseLost that says why, so the run stops and settles as on Ctrl-C. It also carries the
// write fence (see Fenced), which travels with the contexts derived from it, including the
// context.WithoutCancel ones a cancelled run settles on. release cancels runCtx and gives every
// Lease back; it is meant for defer.
func Hold(ctx context.Context, c client.Client, namespace string, keys []Key, holder string, duration time.Duration, clock Clock) (runCtx context.Context, release func(), err error) {
	var (
		held    []*Held
		cancels []context.CancelFunc
	)
	release = func() {
		for _, cancel := range slices.Backward(cancels) {
			cancel()
		}
		// Outlives cancellation: a cancelled apply gives its Leases back, so the next need not wait.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseSettle)
		defer cancel()
		for _, h := range slices.Backward(held) {
			_ = h.Release(rctx)
		}
	}
	runCtx = ctx
	for _, key := range keys {
		h, err := Acquire(ctx, c, namespace, key, holder, duration, clock)
		if err != nil {
			release()
			return nil, nil, err
		}
		held = append(held, h)
		var cancel context.CancelFunc
		runCtx, cancel = h.Fence(runCtx)
		cancels = append(cancels, cancel)
	}
	valid := func() error {
		for _, h := range held {
			if err := h.Valid(); err != nil {
				return err
			}
		}
		return nil
	}
	return WithFence(runCtx, valid), release, nil
}

type fenceKey struct{}

// WithFence returns ctx carrying the write fence valid, which Fenced calls. Hold sets it; a
// test sets its own to cut a run off at a chosen point.
func WithFence(ctx context.Context, valid func() error) context.Context {
	return context.WithValue(ctx, fenceKey{}, valid)
}

// Unfenced returns ctx without its write fence, for the one write a run makes after its Lease may
// be lost: a revision's failure, seen on a cluster, kept in that cluster's own records. The fence
// keeps a runner that lost its Lease from changing what a contender may now own (the records'
// slots, the objects); a verdict is a fact about the revision that any contender needs too, and
// dropping it would let the next plan offer the failed revision again as if nothing had happened.
func Unfenced(ctx context.Context) context.Context {
	return WithFence(ctx, func() error { return nil })
}

// Fenced is the write fence of the apply ctx belongs to (see Hold): nil while all its Leases
// are held by this process's own clock (Held.Valid), an error wrapping ErrLeaseLost once one
// may not be. Every write of an apply checks it right before writing, so that a process paused
// or cut off past its Lease (a contender may hold it now) writes nothing more — not even the
// restores and records a cancelled run otherwise settles with. Contexts outside an apply have no
// fence.
func Fenced(ctx context.Context) error {
	if valid, ok := ctx.Value(fenceKey{}).(func() error); ok {
		return valid()
	}
	return nil
}
