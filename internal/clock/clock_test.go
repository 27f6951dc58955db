package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresInOrder(t *testing.T) {
	c := NewFake(epoch)
	var fired []string
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "b") })
	c.AfterFunc(time.Second, func() { fired = append(fired, "a") })
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "c") })
	stop := c.AfterFunc(1500*time.Millisecond, func() { fired = append(fired, "stopped") })
	if !stop() || stop() {
		t.Error("stop should succeed exactly once")
	}
	c.Advance(1500 * time.Millisecond)
	if !slices.Equal(fired, []string{"a"}) || !c.Now().Equal(epoch.Add(1500*time.Millisecond)) {
		t.Fatalf("after 1.5s: fired %q at %s", fired, c.Now())
	}
	if !c.AdvanceToNext() || !slices.Equal(fired, []string{"a", "b", "c"}) || !c.Now().Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("after next: fired %q at %s", fired, c.Now())
	}
	if c.AdvanceToNext() || c.Pending() != 0 {
		t.Error("timers left over")
	}
}

func TestFakeSleepAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewFake(epoch)
		ctx := context.Background()

		done := make(chan error)
		go func() { done <- c.Sleep(ctx, time.Minute) }()
		synctest.Wait()
		c.Advance(59 * time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Sleep returned early")
		default:
		}
		c.Advance(time.Second)
		if err := <-done; err != nil {
			t.Fatalf("Sleep: %v", err)
		}

		tctx, cancel := c.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if d, ok := tctx.Deadline(); !ok || !d.Equal(epoch.Add(time.Minute+5*time.Minute)) {
			t.Errorf("Deadline = %s, %v", d, ok)
		}
		go func() { done <- c.Sleep(tctx, time.Hour) }()
		synctest.Wait()
		c.Advance(5 * time.Minute)
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sleep past the timeout returned %v", err)
		}
		if !errors.Is(tctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", tctx.Err())
		}
		if c.Pending() != 0 {
			t.Errorf("%d timers pending after the sleep was interrupted", c.Pending())
		}

		// Cancelling the timeout early stops its timer and is not a timeout.
		tctx, cancel = c.WithTimeout(ctx, time.Second)
		cancel()
		if c.Pending() != 0 || errors.Is(tctx.Err(), context.DeadlineExceeded) || tctx.Err() == nil {
			t.Errorf("after cancel: %d pending, Err %v", c.Pending(), tctx.Err())
		}
	})
}

func TestSystem(t *testing.T) {
	var c Clock = System{}
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}
	tctx, cancel := c.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, ok := tctx.Deadline(); !ok {
		t.Error("WithTimeout without a deadline")
	}
}

// TestOutlive: the context outlives its parent's cancellation by grace exactly, by the clock it
// is given, keeps the parent's values, and cancel ends it at any time without leaving a timer.
func TestOutlive(t *testing.T) {
	type key struct{}
	synctest.Test(t, func(t *testing.T) {
		c := NewFake(epoch)
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		ctx, cancel := Outlive(parent, c, time.Minute)
		defer cancel()
		if ctx.Value(key{}) != "v" {
			t.Error("the parent's values are lost")
		}
		c.Advance(time.Hour)
		if ctx.Err() != nil {
			t.Fatal("ended while its parent lives")
		}
		cancelParent()
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("ended with its parent")
		}
		c.Advance(time.Minute - time.Nanosecond)
		if ctx.Err() != nil {
			t.Fatal("ended before its grace")
		}
		c.Advance(time.Nanosecond)
		synctest.Wait()
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("after its grace: Err %v, cause %v; want the deadline", ctx.Err(), context.Cause(ctx))
		}
		if n := c.Pending(); n != 0 {
			t.Errorf("%d timers left", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c := NewFake(epoch)
		parent, cancelParent := context.WithCancel(context.Background())
		defer cancelParent()
		ctx, cancel := Outlive(parent, c, time.Minute)
		cancelParent()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !errors.Is(context.Cause(ctx), context.Canceled) || c.Pending() != 0 {
			t.Errorf("cancelled within its grace: cause %v, %d timers left", context.Cause(ctx), c.Pending())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		parent, cancelParent := context.WithCancel(context.Background())
		ctx, cancel := Outlive(parent, System{}, time.Minute)
		defer cancel()
		cancelParent()
		time.Sleep(time.Minute - time.Nanosecond)
		if ctx.Err() != nil {
			t.Fatal("the wall clock: ended before its grace")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Errorf("the wall clock: cause %v after its grace", context.Cause(ctx))
		}
	})
}
