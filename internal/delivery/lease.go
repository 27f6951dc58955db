package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// HoldLease takes key's Lease for one apply by holder, so that two applies of the same rollout
// or assignment never run at once. When another apply holds it (it renews the Lease while this
// one watches; a Lease left unrenewed for its duration plus a margin is taken over, so this may
// wait up to that long), the error is a user error with busyTitle and busyDetail (each caller names what
// is running).
//
// runCtx and release are records.Hold's: runCtx is cancelled when the Lease is lost (LeaseLost
// turns the run's error into one that says so) and carries the write fence (records.Fenced).
func (s *Service) HoldLease(ctx context.Context, recordNamespace string, key records.Key, holder, busyTitle, busyDetail string) (runCtx context.Context, release func(), err error) {
	runCtx, release, err = records.Hold(ctx, s.mgmt.Client, recordNamespace, []records.Key{key}, holder, cmp.Or(s.leaseDuration, settings.DefaultLeaseDuration), s.clock)
	if err != nil {
		var held *records.HeldError
		if errors.As(err, &held) {
			return nil, nil, usererr.Wrap(err, busyTitle, busyDetail)
		}
		return nil, nil, fmt.Errorf("acquire the Lease of %s: %w", key.Describe(), err)
	}
	return runCtx, release, nil
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
	if _, ok := usererr.As(err); ok && errors.Is(err, records.ErrLeaseLost) {
		return err // already said so
	}
	return usererr.Wrap(fmt.Errorf("%w (%v)", cause, err), "Lease Lost",
		fmt.Sprintf("%s stopped because it lost its Lease: another apply may be running it now. "+
			"What was in flight was brought to a recorded state; the next plan shows what is left.", what))
}
