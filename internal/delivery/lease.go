package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// HoldLease takes key's Lease for one apply by holder, so that two applies of the same rollout
// or assignment never run at once. When another apply holds it, the error is a user error with
// busyTitle and busyDetail (each caller names what is running). release gives the Lease back; it
// is meant for defer and still runs, for up to ten seconds, after ctx is cancelled, so that an
// interrupted apply does not leave the next one waiting for the Lease to expire.
func (s *Service) HoldLease(ctx context.Context, recordNamespace string, key records.Key, holder, busyTitle, busyDetail string) (release func(), err error) {
	lease, err := records.Acquire(ctx, s.mgmt.Client, recordNamespace, key, holder, LeaseDuration, nil)
	if err != nil {
		var held *records.HeldError
		if errors.As(err, &held) {
			return nil, usererr.Wrap(err, busyTitle, busyDetail)
		}
		return nil, fmt.Errorf("acquire the Lease of %s: %w", key.Describe(), err)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = lease.Release(rctx)
	}, nil
}
