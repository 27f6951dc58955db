package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// HoldLease takes key's Lease for one apply by holder, so that two applies of the same rollout
// or assignment never run at once. When another apply holds it (it renews the Lease while this
// one watches; a Lease left unrenewed for its duration plus a margin is taken over, so this may
// wait up to that long), the error is a user error with busyTitle and busyDetail (each caller names what
// is running).
//
// runCtx, derived from ctx, is what the apply runs on: it is cancelled when the Lease is lost
// (taken over, deleted, or not renewed for its duration), with a cause wrapping
// records.ErrLeaseLost that says why, so the run stops and settles as on Ctrl-C; LeaseLost
// turns the run's error into one that says so. release gives the Lease back and cancels
// runCtx; it is meant for defer and still runs, for up to ten seconds, after ctx is cancelled,
// so that an interrupted apply does not leave the next one waiting for the Lease to expire.
func (s *Service) HoldLease(ctx context.Context, recordNamespace string, key records.Key, holder, busyTitle, busyDetail string) (runCtx context.Context, release func(), err error) {
	lease, err := records.Acquire(ctx, s.mgmt.Client, recordNamespace, key, holder, cmp.Or(s.leaseDuration, DefaultLeaseDuration), s.clock)
	if err != nil {
		var held *records.HeldError
		if errors.As(err, &held) {
			return nil, nil, usererr.Wrap(err, busyTitle, busyDetail)
		}
		return nil, nil, fmt.Errorf("acquire the Lease of %s: %w", key.Describe(), err)
	}
	runCtx, cancel := lease.Fence(ctx)
	// The write fence travels with the run's context, and with the fresh contexts derived from
	// it (context.WithoutCancel keeps values) on which a cancelled run settles.
	runCtx = context.WithValue(runCtx, fenceKey{}, lease.Valid)
	return runCtx, func() {
		cancel()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		_ = lease.Release(rctx)
	}, nil
}

type fenceKey struct{}

// Fenced is the write fence of the run ctx belongs to: nil while its Lease is held by this
// process's own clock (records.Held.Valid), an error wrapping records.ErrLeaseLost once it may
// not be. Every write of a run checks it right before writing, so that a process paused or cut
// off past its Lease (a contender may hold it now) writes nothing more — not even the restores
// and records a cancelled run otherwise settles with. Contexts outside a run have no fence.
func Fenced(ctx context.Context) error {
	if valid, ok := ctx.Value(fenceKey{}).(func() error); ok {
		return valid()
	}
	return nil
}

// LeaseLost returns err as a user error saying that the Lease was lost and why, when runCtx
// (from HoldLease) was cancelled for that; otherwise err unchanged. Nil stays nil.
func LeaseLost(runCtx context.Context, err error, what string) error {
	if err == nil {
		return nil
	}
	cause := context.Cause(runCtx)
	if !errors.Is(cause, records.ErrLeaseLost) {
		return err
	}
	if u, ok := usererr.As(err); ok && u.Summary == "Lease Lost" {
		return err
	}
	return usererr.Wrap(fmt.Errorf("%w (%v)", cause, err), "Lease Lost",
		fmt.Sprintf("%s stopped because it lost its Lease: another apply may be running it now. "+
			"What was in flight was brought to a recorded state; the next plan shows what is left.", what))
}
