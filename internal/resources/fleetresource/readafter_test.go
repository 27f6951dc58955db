package fleetresource

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// ReadAfter reads even when the apply's own time is up (the state should say what the clusters
// hold), within delivery.SettleTimeout.
func TestReadAfterOutlivesTheApplyWithinTheSettleBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Ctrl-C, or the apply's timeout
		got, ok := ReadAfter(ctx, func(ctx context.Context) (string, error) { return "fleet", ctx.Err() })
		if !ok || got != "fleet" {
			t.Fatalf("read %q, %v after the apply was cancelled: want the fleet read", got, ok)
		}
		var sys clock.System
		start := sys.Now()
		_, ok = ReadAfter(ctx, func(ctx context.Context) (string, error) {
			<-ctx.Done() // a management cluster that stopped answering
			return "", ctx.Err()
		})
		if took := sys.Now().Sub(start); ok || took != delivery.SettleTimeout {
			t.Errorf("a read that never answers: ok %v after %s, want cut off after %s", ok, took, delivery.SettleTimeout)
		}
	})
}
