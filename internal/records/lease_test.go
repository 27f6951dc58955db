package records

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func getLease(t *testing.T, c client.Client, namespace string, key Key) (*coordinationv1.Lease, error) {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: key.ObjectName()}, l)
	return l, err
}

type acquired struct {
	h   *Held
	err error
}

// acquireAsync runs Acquire in the background (it may watch the Lease for a while).
func acquireAsync(ctx context.Context, c client.Client, holder string, d time.Duration, clock Clock) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		h, err := Acquire(ctx, c, "", ingress, holder, d, clock)
		out <- acquired{h, err}
	}()
	return out
}

func receive(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("Acquire did not return within 10 s")
		return acquired{}
	}
}

// stillWaiting checks that Acquire has not returned, once it is asleep on clock again.
func stillWaiting(t *testing.T, ch <-chan acquired, clock *fakeClock) {
	t.Helper()
	clock.waitSleepers(t, 1)
	select {
	case r := <-ch:
		t.Fatalf("Acquire returned early: %v, %v", r.h, r.err)
	default:
	}
}

func cancelled(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(10 * time.Second):
		t.Fatalf("fenced context not cancelled within 10 s")
		return nil
	}
}

func TestLeaseAcquireReleaseReentrant(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	clock := newFakeClock()
	const d = 30 * time.Second

	a, err := Acquire(ctx, c, "", ingress, "holder-a", d, clock)
	must(t, err)
	l, err := getLease(t, c, DefaultNamespace, ingress)
	must(t, err)
	if *l.Spec.HolderIdentity != "holder-a" || *l.Spec.LeaseDurationSeconds != 30 || !l.Spec.RenewTime.Time.Equal(clock.Now()) {
		t.Fatalf("lease spec %+v", l.Spec)
	}
	// The same identity acquires again at once (a re-entrant apply of the same process).
	again, err := Acquire(ctx, c, "", ingress, "holder-a", d, clock)
	must(t, err)
	must(t, again.Renew(ctx))
	must(t, again.Release(ctx))
	must(t, a.Release(ctx))
	must(t, a.Release(ctx))
	if _, err := getLease(t, c, DefaultNamespace, ingress); !apierrors.IsNotFound(err) {
		t.Fatalf("lease after Release: %v", err)
	}
	if a.Err() != nil {
		t.Fatalf("Err after Release = %v", a.Err())
	}
	// Released: the next apply need not wait.
	b, err := Acquire(ctx, c, "", ingress, "holder-b", d, clock)
	must(t, err)
	must(t, b.Release(ctx))
}

// A live holder renews its Lease while a contender watches: the contender is refused, naming it.
func TestLeaseLiveHolderRefused(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	holderClock, clock := newFakeClock(), newFakeClock()
	const d = 30 * time.Second
	a, err := Acquire(ctx, c, "", ingress, "holder-a", d, holderClock)
	must(t, err)
	t.Cleanup(func() { _ = a.Release(context.Background()) })

	ch := acquireAsync(ctx, c, "holder-b", d, clock)
	clock.step(t, 1, 10*time.Second, time.Second) // watched 10 s unchanged: nothing to say yet
	stillWaiting(t, ch, clock)
	holderClock.Advance(time.Second) // a renewal writes a new renew time
	must(t, a.Renew(ctx))
	clock.step(t, 1, pollInterval(d), time.Second)
	r := receive(t, ch)
	var held *HeldError
	if !errors.As(r.err, &held) || held.Holder != "holder-a" || held.Duration != d {
		t.Fatalf("contender: %v, want a *HeldError naming holder-a", r.err)
	}
	want := "rollout fleet/ingress is being applied by holder-a (holding its Lease since 2026-07-01T12:00:00Z by its clock), which renewed the Lease while this apply watched; " +
		"if that process dies, the Lease is taken over once it has gone 30s without renewal"
	if r.err.Error() != want {
		t.Fatalf("error:\n got  %s\n want %s", r.err, want)
	}
	if l, err := getLease(t, c, DefaultNamespace, ingress); err != nil || *l.Spec.HolderIdentity != "holder-a" {
		t.Fatalf("lease after a refused contender: %v %v", l, err)
	}
}

// A holder that stopped renewing is taken over once the contender has watched its Lease go
// unchanged for the Lease's duration and margin on the contender's own clock, whatever the holder's clock
// said: a renew time far in the past is not expired at once, one far in the future is no
// reason to wait longer. The old holder then finds out and its run context is cancelled.
func TestLeaseTakeoverByObservedTime(t *testing.T) {
	for _, skew := range []time.Duration{0, -24 * time.Hour, 24 * time.Hour, 365 * 24 * time.Hour} {
		t.Run(fmt.Sprintf("holder clock %+v", skew), func(t *testing.T) {
			ctx := t.Context()
			c := newFakeClient(nil)
			holderClock, clock := newFakeClock(), newFakeClock()
			holderClock.Advance(skew)
			const d = 30 * time.Second
			a, err := Acquire(ctx, c, "", ingress, "holder-a", d, holderClock)
			must(t, err)
			t.Cleanup(func() { _ = a.Release(context.Background()) })
			runCtx, cancel := a.Fence(ctx)
			defer cancel()

			ch := acquireAsync(ctx, c, "holder-b", d, clock)
			clock.step(t, 1, d+takeoverMargin(d)-time.Second, time.Second)
			stillWaiting(t, ch, clock)
			clock.step(t, 1, time.Second, time.Second)
			r := receive(t, ch)
			must(t, r.err)
			t.Cleanup(func() { _ = r.h.Release(context.Background()) })
			l, err := getLease(t, c, DefaultNamespace, ingress)
			must(t, err)
			if *l.Spec.HolderIdentity != "holder-b" || *l.Spec.LeaseTransitions != 1 || !l.Spec.AcquireTime.Time.Equal(clock.Now()) {
				t.Fatalf("after takeover: %+v", l.Spec)
			}

			// The old holder's next read of its Lease (a poll interval on) notices the takeover.
			if runCtx.Err() != nil {
				t.Fatalf("run context cancelled before the holder noticed")
			}
			holderClock.step(t, 1, pollInterval(d), time.Second)
			cause := cancelled(t, runCtx)
			if !errors.Is(cause, ErrLeaseLost) || !strings.Contains(cause.Error(), `taken over by "holder-b"`) {
				t.Fatalf("cause: %v", cause)
			}
			if !errors.Is(a.Err(), ErrLeaseLost) {
				t.Fatalf("Err = %v", a.Err())
			}
			// Its Release leaves the new holder's lease alone.
			must(t, a.Release(ctx))
			if l, err := getLease(t, c, DefaultNamespace, ingress); err != nil || *l.Spec.HolderIdentity != "holder-b" {
				t.Fatalf("old holder's Release touched the new holder's lease: %v %v", l, err)
			}
		})
	}
}

// Renew by an old holder after a takeover is refused.
func TestLeaseRenewAfterTakeover(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	holderClock, clock := newFakeClock(), newFakeClock()
	a, err := Acquire(ctx, c, "", ingress, "holder-a", 5*time.Second, holderClock)
	must(t, err)
	ch := acquireAsync(ctx, c, "holder-b", 5*time.Second, clock)
	clock.step(t, 1, 5*time.Second+takeoverMargin(5*time.Second), 500*time.Millisecond)
	b := receive(t, ch)
	must(t, b.err)
	if err := a.Renew(ctx); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), `taken over by "holder-b"`) {
		t.Fatalf("renew after takeover: %v", err)
	}
	select {
	case <-a.Done():
	default:
		t.Fatalf("Done not closed after the lease was lost")
	}
	must(t, a.Release(ctx))
	must(t, b.h.Release(ctx))
}

// A Lease deleted from under its holder is lost at the holder's next read.
func TestLeaseDeletedCancelsRun(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	clock := newFakeClock()
	const d = time.Minute
	h, err := Acquire(ctx, c, "leases", ingress, "me", d, clock)
	must(t, err)
	runCtx, cancel := h.Fence(ctx)
	defer cancel()
	l, err := getLease(t, c, "leases", ingress)
	must(t, err)
	must(t, c.Delete(ctx, l))
	clock.step(t, 1, pollInterval(d), time.Second)
	cause := cancelled(t, runCtx)
	if !errors.Is(cause, ErrLeaseLost) || !strings.Contains(cause.Error(), "was deleted") {
		t.Fatalf("cause: %v", cause)
	}
	if err := h.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew of a deleted lease: %v", err)
	}
	must(t, h.Release(ctx))
}

// Renewals that fail (the management cluster unreachable) lose the Lease once they have failed
// for its whole duration, by the holder's clock, not before; failures that end sooner do not.
func TestLeaseRenewFailuresPastDuration(t *testing.T) {
	ctx := t.Context()
	var failing atomic.Bool
	unavailable := apierrors.NewServiceUnavailable("management cluster down")
	c := newFakeClient(&interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if failing.Load() {
				return unavailable
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if failing.Load() {
				return unavailable
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	clock := newFakeClock()
	const d = 30 * time.Second
	h, err := Acquire(ctx, c, "", ingress, "me", d, clock)
	must(t, err)
	runCtx, cancel := h.Fence(ctx)
	defer cancel()

	// Failing for 25 s, then recovering: renewed, still held.
	failing.Store(true)
	clock.step(t, 1, 25*time.Second, time.Second)
	failing.Store(false)
	clock.step(t, 1, 2*time.Second, time.Second)
	clock.waitSleepers(t, 1)
	if runCtx.Err() != nil || !h.RenewedAt().After(clock.Now().Add(-3*time.Second)) {
		t.Fatalf("after a recovered outage: ctx %v, renewed at %s (now %s)", context.Cause(runCtx), h.RenewedAt(), clock.Now())
	}

	// Failing for longer than the duration: lost exactly when the duration has passed.
	failing.Store(true)
	renewed := h.RenewedAt()
	clock.step(t, 1, renewed.Add(d).Sub(clock.Now())-time.Second, time.Second)
	clock.waitSleepers(t, 1)
	if runCtx.Err() != nil {
		t.Fatalf("lost %s before the duration passed: %v", clock.Now().Sub(renewed), context.Cause(runCtx))
	}
	clock.step(t, 1, time.Second, time.Second)
	cause := cancelled(t, runCtx)
	if !errors.Is(cause, ErrLeaseLost) || !strings.Contains(cause.Error(), "could not be renewed for 30s") || !strings.Contains(cause.Error(), "management cluster down") {
		t.Fatalf("cause: %v", cause)
	}
	failing.Store(false)
	must(t, h.Release(ctx))
}

// A Lease planted with a foreign holder and no duration is watched for the acquirer's duration;
// a cancelled Acquire says what it waited for.
func TestLeaseAcquireCancelledWhileWatching(t *testing.T) {
	c := newFakeClient(nil)
	must(t, ensureNamespace(t.Context(), c, DefaultNamespace))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: ingress.ObjectName(), Annotations: map[string]string{AnnotationRolloutKey: ingress.String()}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone")},
	}
	must(t, c.Create(t.Context(), l))
	clock := newFakeClock()
	ctx, cancel := context.WithCancelCause(t.Context())
	ch := acquireAsync(ctx, c, "me", 10*time.Second, clock)
	clock.step(t, 1, 9*time.Second, time.Second)
	stillWaiting(t, ch, clock)
	cancel(errors.New("interrupted"))
	r := receive(t, ch)
	if r.err == nil || !strings.Contains(r.err.Error(), "held by someone: interrupted") {
		t.Fatalf("cancelled Acquire: %v", r.err)
	}
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

// raceAcquire has racers acquire the Lease at once, each through its own client: exactly one
// wins. Racers that read the winner's Lease before its first renewal watch it; the winner then
// renews (the test calls Renew and moves the clock), and they are refused.
func raceAcquire(t *testing.T, newClient func() client.Client, namespace string, racers int, d time.Duration, clock *fakeClock) (*Held, []*HeldError) {
	t.Helper()
	ctx := t.Context()
	results := make(chan acquired, racers)
	for i := range racers {
		c := newClient()
		go func() {
			h, err := Acquire(ctx, c, namespace, ingress, fmt.Sprintf("racer-%d", i), d, clock)
			results <- acquired{h, err}
		}()
	}
	var (
		winner *Held
		losers []*HeldError
	)
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n < racers; {
		select {
		case r := <-results:
			n++
			var held *HeldError
			switch {
			case r.err == nil && winner == nil:
				winner = r.h
			case r.err == nil:
				t.Fatalf("two winners: %s and %s", winner.Holder(), r.h.Holder())
			case errors.As(r.err, &held):
				losers = append(losers, held)
			default:
				t.Fatalf("racer: %v", r.err)
			}
		case <-time.After(20 * time.Millisecond):
			if winner != nil {
				// A renewal at a later time: a write that changes nothing would not be seen.
				clock.Advance(pollInterval(d))
				must(t, winner.Renew(ctx))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("racers still running after 30 s")
		}
	}
	for _, l := range losers {
		if l.Holder != winner.Holder() {
			t.Errorf("a loser was told %q holds the lease, but %q does", l.Holder, winner.Holder())
		}
	}
	return winner, losers
}

func TestLeaseRace(t *testing.T) {
	c := newFakeClient(nil)
	winner, losers := raceAcquire(t, func() client.Client { return c }, "", 8, time.Minute, newFakeClock())
	if len(losers) != 7 {
		t.Fatalf("%d losers", len(losers))
	}
	must(t, winner.Release(t.Context()))
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
	select {
	case <-h.Done():
	default:
		t.Fatalf("Done not closed after Release")
	}
}

// TestLeaseRenewalsOutliveCancelBounded: a cancelled apply keeps its Lease renewed while it
// settles, but not forever: renewalsOutliveCancel after its context is done the renewals stop
// (the clock's), and the Lease then expires as a dead holder's does.
func TestLeaseRenewalsOutliveCancelBounded(t *testing.T) {
	clock := newFakeClock()
	c := newFakeClient(nil)
	ctx, cancel := context.WithCancel(t.Context())
	h, err := Acquire(ctx, c, "", ingress, "me", 30*time.Second, clock)
	must(t, err)
	defer func() { _ = h.Release(t.Context()) }()
	cancel()
	// The renew loop and the bound's timer sleep on the clock.
	clock.step(t, 2, renewalsOutliveCancel-5*time.Second, 5*time.Second)
	if err := h.Valid(); err != nil {
		t.Fatalf("%s after its context was cancelled: %v; want the Lease still renewed", renewalsOutliveCancel-5*time.Second, err)
	}
	clock.Advance(5 * time.Second)
	select {
	case <-h.stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("renewals go on %s after the context was cancelled", renewalsOutliveCancel)
	}
	clock.Advance(30 * time.Second)
	if err := h.Valid(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Valid after the renewals stopped and the duration passed = %v, want ErrLeaseLost", err)
	}
}
