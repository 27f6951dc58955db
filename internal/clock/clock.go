// Package clock is the project's one definition of time: the wall clock for production, a fake
// clock whose time moves only when a test says so, and the interfaces the packages take (the
// engine's bake times and timeouts, the records' stamps and Lease renewals, apply's polling).
package clock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// Reader tells the time: what record stamps and Lease expiry need.
type Reader interface {
	// Now returns the current time.
	Now() time.Time
}

// Sleeper tells the time and waits.
type Sleeper interface {
	Reader
	// Sleep waits for d, or until ctx is done, in which case it returns
	// the context's cause.
	Sleep(ctx context.Context, d time.Duration) error
}

// Clock is a Sleeper that also makes timeouts. Bake times, verify timeouts and
// rollback timeouts all go through it, so tests can run them instantly with
// a Fake (the approach of hashicorp/terraform-provider-time).
type Clock interface {
	Sleeper
	// WithTimeout returns a context that is done after d (its Err is then
	// context.DeadlineExceeded) or when ctx is.
	WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// System is the wall clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Sleep waits for d or until ctx is done.
func (System) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

// Sleep waits for d on the wall clock, or until ctx is done, in which case it returns the
// context's cause.
func Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// WithTimeout is context.WithTimeout.
func (System) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// Outlive returns a context with ctx's values that ctx's cancellation does not end at once: it
// ends grace after ctx is done, by c (its cause is then context.DeadlineExceeded), or when
// cancel is called. It is for work that must outlive its caller's cancellation, bounded: a
// Lease renewed while a cancelled run settles, a progress write still due. cancel releases it.
func Outlive(ctx context.Context, c Clock, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopWatch := context.AfterFunc(ctx, func() {
		tctx, tcancel := c.WithTimeout(out, grace)
		// Done by the timeout (out ends with DeadlineExceeded) or because out ended first (a
		// no-op then); either way the timer is released.
		context.AfterFunc(tctx, func() {
			cancel(context.DeadlineExceeded)
			tcancel()
		})
	})
	return out, func() {
		stopWatch()
		cancel(context.Canceled)
	}
}

// Fake is a Clock whose time moves only when told to (Advance,
// AdvanceToNext). Timers due at the same instant fire in the order they were
// set, which keeps simulations deterministic. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep blocks until the fake time has advanced by d or ctx is done.
func (c *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	ch := make(chan struct{})
	t := c.schedule(d, func() { close(ch) })
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		c.stop(t)
		return context.Cause(ctx)
	}
}

// WithTimeout returns a context that is done once the fake time has
// advanced by d, or when ctx is.
func (c *Fake) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(ctx)
	tctx := &fakeTimeoutCtx{Context: inner, deadline: c.Now().Add(d)}
	if d <= 0 {
		cancel(context.DeadlineExceeded)
		return tctx, func() {}
	}
	t := c.schedule(d, func() { cancel(context.DeadlineExceeded) })
	return tctx, func() {
		c.stop(t)
		cancel(context.Canceled)
	}
}

// AfterFunc calls f (on the goroutine advancing the clock) once the fake
// time has advanced by d. The returned function cancels it and reports
// whether it did so before f ran.
func (c *Fake) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	t := c.schedule(max(d, 0), f)
	return func() bool { return c.stop(t) }
}

// Advance moves the fake time forward by d, firing every timer due on the
// way in order.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for c.fireNext(end) {
	}
	c.mu.Lock()
	if c.now.Before(end) {
		c.now = end
	}
	c.mu.Unlock()
}

// AdvanceToNext moves the fake time to the earliest pending timer and fires
// every timer due at that instant. It reports false when no timer is pending.
func (c *Fake) AdvanceToNext() bool {
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		return false
	}
	when := c.timers[0].when
	c.mu.Unlock()
	for c.fireNext(when) {
	}
	return true
}

// Pending counts timers that have not fired yet.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fireNext fires the earliest timer due at or before end, reporting whether
// there was one. The lock is released before calling the timer's function,
// which may set or stop timers itself.
func (c *Fake) fireNext(end time.Time) bool {
	c.mu.Lock()
	if len(c.timers) == 0 || c.timers[0].when.After(end) {
		c.mu.Unlock()
		return false
	}
	t, _ := heap.Pop(&c.timers).(*fakeTimer) // the heap holds only *fakeTimer
	if t.when.After(c.now) {
		c.now = t.when
	}
	c.mu.Unlock()
	t.fire()
	return true
}

func (c *Fake) schedule(d time.Duration, fire func()) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{when: c.now.Add(d), seq: c.seq, fire: fire}
	heap.Push(&c.timers, t)
	return t
}

func (c *Fake) stop(t *fakeTimer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	return true
}

// fakeTimeoutCtx makes a fake timeout look like a real one: Err reports
// context.DeadlineExceeded and Deadline the fake deadline, so World
// implementations can treat both clocks alike.
type fakeTimeoutCtx struct {
	context.Context
	deadline time.Time
}

func (c *fakeTimeoutCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *fakeTimeoutCtx) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

type fakeTimer struct {
	when  time.Time
	seq   uint64
	fire  func()
	index int // position in the heap; -1 once fired or stopped
}

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t, _ := x.(*fakeTimer) // only schedule pushes, always a *fakeTimer
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
