package records

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func getLease(t *testing.T, c client.Client, namespace string, key Key) (*coordinationv1.Lease, error) {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: key.ObjectName()}, l)
	return l, err
}

func TestLeaseAcquireConflictExpiryTakeover(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	clock := newFakeClock()
	const d = 30 * time.Second

	a, err := Acquire(ctx, c, "", ingress, "holder-a", d, clock)
	must(t, err)
	t.Cleanup(func() { _ = a.Release(context.Background()) })
	l, err := getLease(t, c, DefaultNamespace, ingress)
	must(t, err)
	if *l.Spec.HolderIdentity != "holder-a" || *l.Spec.LeaseDurationSeconds != 30 || !l.Spec.RenewTime.Time.Equal(clock.Now()) {
		t.Fatalf("lease spec %+v", l.Spec)
	}

	// Held by a live holder: refused, naming the holder and the times.
	clock.Advance(10 * time.Second)
	_, err = Acquire(ctx, c, "", ingress, "holder-b", d, clock)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second holder: %v, want a *HeldError", err)
	}
	want := "rollout fleet/ingress is being applied by holder-a since 2026-07-01T12:00:00Z; lease expires at 2026-07-01T12:00:30Z if that process died"
	if err.Error() != want {
		t.Fatalf("error:\n got  %s\n want %s", err, want)
	}

	// The same identity acquires again (a re-entrant apply of the same process).
	again, err := Acquire(ctx, c, "", ingress, "holder-a", d, clock)
	must(t, err)
	t.Cleanup(func() { _ = again.Release(context.Background()) })
	must(t, again.Renew(ctx))

	// Renewing moves the expiry.
	clock.Advance(25 * time.Second) // 35 s after acquiring, 25 s after renewing
	if _, err := Acquire(ctx, c, "", ingress, "holder-b", d, clock); !errors.As(err, &held) {
		t.Fatalf("renewed lease taken: %v", err)
	}
	if !held.Expires.Equal(clock.Now().Add(5 * time.Second)) {
		t.Fatalf("expires %s, want renew time + 30 s", held.Expires)
	}

	// Expired (holder-a died): taken over.
	clock.Advance(6 * time.Second)
	b, err := Acquire(ctx, c, "", ingress, "holder-b", d, clock)
	must(t, err)
	t.Cleanup(func() { _ = b.Release(context.Background()) })
	l, err = getLease(t, c, DefaultNamespace, ingress)
	must(t, err)
	if *l.Spec.HolderIdentity != "holder-b" || *l.Spec.LeaseTransitions != 1 || !l.Spec.AcquireTime.Time.Equal(clock.Now()) {
		t.Fatalf("after takeover: %+v", l.Spec)
	}

	// The old holder finds out on its next renewal, and its Held is done.
	err = a.Renew(ctx)
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), `now held by "holder-b"`) {
		t.Fatalf("renew after takeover: %v", err)
	}
	select {
	case <-a.Done():
	default:
		t.Fatalf("Done not closed after the lease was lost")
	}
	if !errors.Is(a.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v", a.Err())
	}
	// Its Release leaves the new holder's lease alone.
	must(t, a.Release(ctx))
	if _, err := getLease(t, c, DefaultNamespace, ingress); err != nil {
		t.Fatalf("old holder's Release deleted the new holder's lease: %v", err)
	}

	// Release deletes it: the next apply need not wait.
	must(t, b.Release(ctx))
	must(t, b.Release(ctx))
	if _, err := getLease(t, c, DefaultNamespace, ingress); !apierrors.IsNotFound(err) {
		t.Fatalf("lease after Release: %v", err)
	}
	if b.Err() != nil {
		t.Fatalf("Err after Release = %v", b.Err())
	}
	c2, err := Acquire(ctx, c, "", ingress, "holder-c", d, clock)
	must(t, err)
	must(t, c2.Release(ctx))
}

func TestLeaseRenewAfterDeletionIsLost(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	h, err := Acquire(ctx, c, "leases", ingress, "me", time.Minute, newFakeClock())
	must(t, err)
	l, err := getLease(t, c, "leases", ingress)
	must(t, err)
	must(t, c.Delete(ctx, l))
	if err := h.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew of a deleted lease: %v", err)
	}
	must(t, h.Release(ctx))
}

func TestLeaseValidation(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	if _, err := Acquire(ctx, c, "", ingress, "", time.Minute, nil); err == nil {
		t.Errorf("empty holder accepted")
	}
	if _, err := Acquire(ctx, c, "", ingress, "me", 500*time.Millisecond, nil); err == nil {
		t.Errorf("sub-second duration accepted")
	}
	if _, err := Acquire(ctx, c, "", Key{}, "me", time.Minute, nil); err == nil {
		t.Errorf("empty key accepted")
	}
	id := HolderIdentity()
	if !regexp.MustCompile(`^.+_pid\d+_[0-9a-f]{8}$`).MatchString(id) || id == HolderIdentity() {
		t.Errorf("HolderIdentity %q is not host_pidN_random", id)
	}
}

// TestLeaseRace has many holders acquire at once: exactly one wins, the rest are told who.
func TestLeaseRace(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	clock := newFakeClock()
	const racers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*Held
		losers  []string
	)
	for i := range racers {
		wg.Go(func() {
			h, err := Acquire(ctx, c, "", ingress, fmt.Sprintf("racer-%d", i), time.Minute, clock)
			mu.Lock()
			defer mu.Unlock()
			var held *HeldError
			switch {
			case err == nil:
				winners = append(winners, h)
			case errors.As(err, &held):
				losers = append(losers, held.Holder)
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 || len(losers) != racers-1 {
		t.Fatalf("%d winners, %d losers", len(winners), len(losers))
	}
	for _, holder := range losers {
		if holder != winners[0].Holder() {
			t.Errorf("a loser was told %q holds the lease, but %q does", holder, winners[0].Holder())
		}
	}
	must(t, winners[0].Release(ctx))
}

// TestLeaseRenewsInBackground checks that a held lease is renewed without being asked, and that
// renewals stop on Release. It runs on the wall clock with the shortest lease (1 s: a renewal
// every 333 ms).
func TestLeaseRenewsInBackground(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	h, err := Acquire(ctx, c, "", ingress, "me", time.Second, nil)
	must(t, err)
	first := h.RenewedAt()
	deadline := time.Now().Add(10 * time.Second)
	for !h.RenewedAt().After(first) {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within 10 s of a 1 s lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	l, err := getLease(t, c, DefaultNamespace, ingress)
	must(t, err)
	if !l.Spec.RenewTime.After(first) {
		t.Fatalf("renew time %s not after acquire time %s", l.Spec.RenewTime, first)
	}
	must(t, h.Release(ctx))
	select {
	case <-h.stopped:
	default:
		t.Fatalf("renew loop still running after Release")
	}
}
