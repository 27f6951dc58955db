package records

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// pausedClock is a fake clock on which a process pause can be simulated: Pause moves the time
// the process reads without firing any timer, as a process stopped (SIGSTOP) and resumed finds
// its clock jumped while none of its goroutines ran. Sleeps still wait on the fake clock.
type pausedClock struct {
	*fakeClock
	mu     sync.Mutex
	offset time.Duration
}

func (c *pausedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fakeClock.Now().Add(c.offset)
}

func (c *pausedClock) Pause(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// isDone says whether ch is closed now, without waiting.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// eventually waits (on the wall clock, 10 s at most) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkExpired checks an error of a Lease lost by the holder's own clock.
func checkExpired(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "not renewed for 30s by this process's clock (paused or cut off?)") ||
		strings.Contains(err.Error(), "<nil>") {
		t.Fatalf("error of an expired Lease: %v", err)
	}
}

// A process paused past its Lease's duration finds, on resuming, that Valid fails at once,
// before the renew loop (still asleep) could notice; Valid marks the Held lost, so Done and
// the Fence fire with its error, and the renewals stop. Valid is nil right after Acquire and
// after a renewal, until exactly the duration has passed since the renewal began.
func TestHeldValidAfterPause(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	clock := &pausedClock{fakeClock: newFakeClock()}
	const d = 30 * time.Second
	h, err := Acquire(ctx, c, "", ingress, "me", d, clock)
	must(t, err)
	t.Cleanup(func() { _ = h.Release(context.Background()) })
	runCtx, cancel := h.Fence(ctx)
	defer cancel()
	must(t, h.Valid())

	// A renewal a third of the duration on.
	acquiredAt := h.RenewedAt()
	clock.step(t, 1, d/3, time.Second)
	eventually(t, "a background renewal", func() bool { return h.RenewedAt().After(acquiredAt) })
	clock.waitSleepers(t, 1)
	must(t, h.Valid())
	renewed := h.RenewedAt()

	// Paused for all but a second of the duration since that renewal: still valid.
	clock.Pause(renewed.Add(d).Sub(clock.Now()) - time.Second)
	must(t, h.Valid())
	if isDone(h.Done()) {
		t.Fatalf("done before the duration passed: %v", h.Err())
	}
	// A second more: the duration has passed; the loop sleeps on, Valid says so.
	clock.Pause(time.Second)
	err = h.Valid()
	checkExpired(t, err)
	if !isDone(h.Done()) || h.Err() != err {
		t.Fatalf("after Valid failed: done %v, Err %v", isDone(h.Done()), h.Err())
	}
	if cause := cancelled(t, runCtx); cause != err {
		t.Fatalf("fence cause %v, want Valid's error %v", cause, err)
	}
	if again := h.Valid(); again != err {
		t.Fatalf("Valid again: %v", again)
	}
	select {
	case <-h.stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("renew loop still running after the Lease was lost")
	}
	if err := h.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew of a lost Lease: %v", err)
	}
	if l, err := getLease(t, c, DefaultNamespace, ingress); err != nil || !l.Spec.RenewTime.Time.Equal(renewed) {
		t.Fatalf("lease after the loss: %v %v", l, err)
	}
	// Release gives the Lease back (no one took it over); Valid still says it was lost.
	must(t, h.Release(ctx))
	if _, err := getLease(t, c, DefaultNamespace, ingress); !apierrors.IsNotFound(err) {
		t.Fatalf("lease after Release: %v", err)
	}
	if again := h.Valid(); again != err {
		t.Fatalf("Valid after Release: %v", again)
	}
}

// A renewal stuck in a request that never returns (a cut-off connection) keeps the renew loop
// from ever checking the deadline: Valid still fails once the duration has passed.
func TestHeldValidWhileRenewalHangs(t *testing.T) {
	ctx := t.Context()
	var hang atomic.Bool
	entered, unblock := make(chan struct{}), make(chan struct{})
	var enterOnce sync.Once
	c := newFakeClient(&interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if hang.Load() {
				enterOnce.Do(func() { close(entered) })
				<-unblock // ignores ctx, as a hung request may
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	t.Cleanup(func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
	})
	clock := newFakeClock()
	const d = 30 * time.Second
	h, err := Acquire(ctx, c, "", ingress, "me", d, clock)
	must(t, err)
	runCtx, cancel := h.Fence(ctx)
	defer cancel()

	hang.Store(true)
	clock.step(t, 1, pollInterval(d), time.Second) // the loop's next read hangs
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("the renew loop did not read the Lease")
	}
	clock.Advance(d - pollInterval(d) - time.Second)
	must(t, h.Valid())
	clock.Advance(time.Second)
	if isDone(h.Done()) {
		t.Fatalf("done before Valid was called: %v", h.Err()) // the loop is stuck: only Valid can tell
	}
	err = h.Valid()
	checkExpired(t, err)
	if cause := cancelled(t, runCtx); cause != err {
		t.Fatalf("fence cause %v, want Valid's error %v", cause, err)
	}
	hang.Store(false)
	close(unblock)
	must(t, h.Release(ctx))
}

// After Release, Valid fails (the Lease may be anyone's), though Err stays nil.
func TestHeldValidAfterRelease(t *testing.T) {
	ctx := t.Context()
	h, err := Acquire(ctx, newFakeClient(nil), "", ingress, "me", 30*time.Second, newFakeClock())
	must(t, err)
	must(t, h.Valid())
	must(t, h.Release(ctx))
	if err := h.Valid(); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "released") {
		t.Fatalf("Valid after Release: %v", err)
	}
	if h.Err() != nil {
		t.Fatalf("Err after Release = %v", h.Err())
	}
}

func TestLeaseTakeoverMarginValues(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		time.Second: time.Second, 2 * time.Second: time.Second, 4 * time.Second: time.Second,
		8 * time.Second: 2 * time.Second, 30 * time.Second: 7500 * time.Millisecond, time.Minute: 15 * time.Second,
	} {
		if got := takeoverMargin(d); got != want {
			t.Errorf("takeoverMargin(%s) = %s, want %s", d, got, want)
		}
	}
}

// A contender does not take over at observed+duration, nor just before the margin ends, but
// does once the duration and margin have passed.
func TestLeaseTakeoverAfterMargin(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	holderClock, clock := newFakeClock(), newFakeClock()
	const d = 30 * time.Second
	const step = 500 * time.Millisecond
	a, err := Acquire(ctx, c, "", ingress, "holder-a", d, holderClock)
	must(t, err)
	t.Cleanup(func() { _ = a.Release(context.Background()) })

	ch := acquireAsync(ctx, c, "holder-b", d, clock)
	clock.step(t, 1, d, step)
	stillWaiting(t, ch, clock) // exactly the duration: not yet
	clock.step(t, 1, takeoverMargin(d)-step, step)
	stillWaiting(t, ch, clock)
	clock.step(t, 1, step, step)
	r := receive(t, ch)
	must(t, r.err)
	t.Cleanup(func() { _ = r.h.Release(context.Background()) })
	if l, err := getLease(t, c, DefaultNamespace, ingress); err != nil || *l.Spec.HolderIdentity != "holder-b" {
		t.Fatalf("after the margin: %v %v", l, err)
	}
}

// The times written into the Lease (by a contender taking over, and by a renewal) are taken
// after the read that judged it; the holder's own deadline counts from before that read.
func TestLeaseStampsAfterRead(t *testing.T) {
	ctx := t.Context()
	base := newFakeClient(nil)
	holderClock, clock := newFakeClock(), newFakeClock()
	const d = 30 * time.Second
	const readTime = 3 * time.Second // each read by the contender takes this long on its clock
	a, err := Acquire(ctx, base, "", ingress, "holder-a", d, holderClock)
	must(t, err)
	t.Cleanup(func() { _ = a.Release(context.Background()) })

	type write struct{ renew, readEnd time.Time }
	var (
		mu      sync.Mutex
		readEnd time.Time // when the contender's last read returned, by its clock
		writes  []write
	)
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			clock.Advance(readTime)
			mu.Lock()
			readEnd = clock.Now()
			mu.Unlock()
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			renew, _, _ := unstructured.NestedString(obj.(*unstructured.Unstructured).Object, "spec", "renewTime")
			at, perr := time.Parse(time.RFC3339Nano, renew)
			if perr != nil {
				t.Errorf("renewTime %q: %v", renew, perr)
			}
			mu.Lock()
			writes = append(writes, write{at, readEnd})
			mu.Unlock()
			return c.Update(ctx, obj, opts...)
		},
	})
	lastWrite := func() write {
		mu.Lock()
		defer mu.Unlock()
		if len(writes) == 0 {
			t.Fatalf("no write")
		}
		return writes[len(writes)-1]
	}

	// Takeover: the contender sleeps on its clock between reads; move it until it takes over.
	ch := acquireAsync(ctx, c, "holder-b", d, clock)
	var r acquired
	deadline := time.Now().Add(10 * time.Second)
	for done := false; !done; {
		select {
		case r = <-ch:
			done = true
		default:
			if time.Now().After(deadline) {
				t.Fatalf("no takeover within 10 s")
			}
			if clock.Pending() > 0 {
				clock.Advance(time.Second)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
	}
	must(t, r.err)
	b := r.h
	t.Cleanup(func() { _ = b.Release(context.Background()) })
	b.stop() // no background renewals from here on: the test renews
	<-b.stopped
	w := lastWrite()
	if w.renew.Before(w.readEnd) {
		t.Fatalf("takeover stamped %s, before its read returned at %s", w.renew, w.readEnd)
	}
	if got := b.RenewedAt(); got.After(w.readEnd.Add(-readTime)) {
		t.Fatalf("deadline base %s is not from before the read (which returned at %s)", got, w.readEnd)
	}

	// Renewal: the same rule.
	clock.Advance(time.Second)
	start := clock.Now()
	must(t, b.Renew(ctx))
	w = lastWrite()
	if w.renew.Before(start.Add(readTime)) || w.renew.Before(w.readEnd) {
		t.Fatalf("renewal begun at %s stamped %s, before its read returned at %s", start, w.renew, w.readEnd)
	}
	if !b.RenewedAt().Equal(start) {
		t.Fatalf("renewed at %s, want %s (before the read)", b.RenewedAt(), start)
	}
	l, err := getLease(t, base, DefaultNamespace, ingress)
	must(t, err)
	if !l.Spec.RenewTime.Time.Equal(w.renew) {
		t.Fatalf("lease renew time %s, want %s", l.Spec.RenewTime, w.renew)
	}
}

// A renew loop that wakes past its deadline without a failed renewal (the process was paused
// while it slept) says so, with no "<nil>" cause.
func TestLeaseLostMessageWithoutCause(t *testing.T) {
	ctx := t.Context()
	clock := &pausedClock{fakeClock: newFakeClock()}
	const d = 30 * time.Second
	h, err := Acquire(ctx, newFakeClient(nil), "", ingress, "me", d, clock)
	must(t, err)
	t.Cleanup(func() { _ = h.Release(context.Background()) })
	runCtx, cancel := h.Fence(ctx)
	defer cancel()
	clock.waitSleepers(t, 1)
	clock.Pause(d)
	clock.Advance(pollInterval(d)) // the loop wakes, before anything called Valid
	checkExpired(t, cancelled(t, runCtx))

	for _, err := range []error{h.expired(nil), h.expired(errors.New("boom"))} {
		if !errors.Is(err, ErrLeaseLost) || strings.Contains(err.Error(), "<nil>") {
			t.Errorf("expired: %v", err)
		}
	}
}
