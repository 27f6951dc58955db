package records

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var leaseGVK = coordinationv1.SchemeGroupVersion.WithKind("Lease")

// ErrLeaseLost is wrapped by the errors of a Held lease that another holder took over, that was
// deleted, or that could not be renewed before it expired.
var ErrLeaseLost = errors.New("lease lost")

// HeldError says that another process holds a rollout's Lease: it renewed the Lease while this
// process watched it.
type HeldError struct {
	Key    Key
	Holder string
	// Since is when the holder acquired the Lease, by the holder's clock (informational only:
	// expiry is never judged by the holder's times).
	Since time.Time
	// Duration is the Lease's duration: how long it must go unrenewed, as this process
	// observes it, before another process may take it over (plus takeoverMargin of it).
	Duration time.Duration
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is being applied by %s (holding its Lease since %s by its clock), which renewed the Lease while this apply watched; "+
		"if that process dies, the Lease is taken over once it has gone %s without renewal",
		e.Key.Describe(), e.Holder, e.Since.UTC().Format(time.RFC3339), e.Duration)
}

// HolderIdentity names this process for Lease holders and progress records: host name, process
// id and a random suffix (two providers in one process are still told apart).
func HolderIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s_pid%d_%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Held is an acquired Lease, renewed in the background every third of its duration until
// Release (or until it is lost: see Done). Between renewals it is read every poll interval, so
// a takeover or deletion is noticed within seconds.
//
// Expiry is judged by observed time, as client-go's leader election does: a contender
// remembers when, by its own clock, it last saw the Lease's record (holder, times,
// resourceVersion) change, and takes the Lease over only once it has seen no change for the
// Lease's duration plus a margin (takeoverMargin). The holder, for its part, counts the Lease
// lost when it has not renewed it for its duration by its own clock, and checks that with Valid
// before every write. No one ever compares another process's timestamps with its own clock, so
// skewed clocks cannot make two holders.
type Held struct {
	c         client.Client
	namespace string
	key       Key
	holder    string
	duration  time.Duration
	poll      time.Duration
	clock     Clock

	mu        sync.Mutex
	renewedAt time.Time // see setRenewed: taken before the read and write that renewed
	err       error
	released  bool // Release has begun: Valid fails from then on

	stopCtx  context.Context
	stop     context.CancelFunc
	stopped  chan struct{} // closed when the renew loop has returned
	done     chan struct{} // closed when the lease is lost or released
	doneOnce sync.Once
}

// pollInterval is how often a Lease is read between renewals (by its holder) and while
// watching another holder's (by a contender): a tenth of its duration, from 100 ms to 2 s.
func pollInterval(d time.Duration) time.Duration {
	return min(max(d/10, 100*time.Millisecond), 2*time.Second)
}

// Acquire takes the rollout's Lease in namespace of the management cluster for holder. It
// succeeds at once when the Lease is absent, released or already held by holder. When another
// holder has it, Acquire watches it: a change of its record (a renewal, a takeover) while
// watching means a live holder, and Acquire returns a *HeldError naming it; a record left
// unchanged for the Lease's duration plus takeoverMargin of it, by clock, means a dead holder,
// and Acquire takes the Lease over. So Acquire may wait up to a Lease's duration and margin (it
// returns ctx's cause if ctx ends first).
// duration is rounded up to whole seconds and must be at least one. The namespace is created if
// missing. The background renewals outlive ctx (an apply being cancelled must still hold the
// Lease while it brings clusters to a recorded state): they stop on Release, or
// renewalsOutliveCancel after ctx is done.
func Acquire(ctx context.Context, c client.Client, namespace string, key Key, holder string, duration time.Duration, clock Clock) (*Held, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if holder == "" {
		return nil, errors.New("acquire lease: holder identity is empty")
	}
	if duration < time.Second {
		return nil, fmt.Errorf("acquire lease: duration %s is shorter than a second", duration)
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	h := &Held{
		c: c, namespace: namespace, key: key, holder: holder,
		duration: time.Duration(math.Ceil(duration.Seconds())) * time.Second,
		clock:    clockOrSystem(clock),
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	h.poll = pollInterval(h.duration)
	// Outlives cancellation: a cancelled apply keeps its Lease while it settles (bounded).
	h.stopCtx, h.stop = outlive(ctx, h.clock, renewalsOutliveCancel)
	if err := h.acquire(ctx); err != nil {
		h.stop()
		return nil, err
	}
	go h.loop(h.stopCtx)
	return h, nil
}

// renewalsOutliveCancel bounds how long a Lease's renewals go on after the context it was
// acquired with is done, unless Release stops them first (as it always should). A cancelled run
// settles within minutes (restores within the engine's rollback timeout of 10 minutes, records
// and reads within settle timeouts of seconds to minutes): an hour is generous, and stops
// renewals that a holder forgot to Release; the Lease then expires as a dead holder's does.
const renewalsOutliveCancel = time.Hour

// takeoverMargin is how much longer than a Lease's duration d a contender waits, after it last
// saw the Lease change, before it takes the Lease over: a quarter of d, at least a second. The
// old holder stops writing once d has passed since its last renewal began (Valid), but two
// things can stretch that on the contender's side: request latency (a write the holder sent
// just before its deadline lands later; its last renewal reached the server some time after
// the holder took its time) and clock-rate drift (d on the holder's clock may be a little
// longer than d on the contender's). The margin absorbs both.
func takeoverMargin(d time.Duration) time.Duration {
	return max(d/4, time.Second)
}

// observedRecord is what a contender compares between reads of a Lease: any change means its
// holder is alive.
func observedRecord(l *coordinationv1.Lease) string {
	if l == nil {
		return "absent"
	}
	micro := func(t *metav1.MicroTime) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s", l.UID, l.ResourceVersion, ptr.Deref(l.Spec.HolderIdentity, ""),
		ptr.Deref(l.Spec.LeaseDurationSeconds, 0), ptr.Deref(l.Spec.LeaseTransitions, 0), micro(l.Spec.AcquireTime), micro(l.Spec.RenewTime))
}

func (h *Held) acquire(ctx context.Context) error {
	// Each round reads the Lease and writes it guarded by what it read; losing a race is a
	// conflict (or AlreadyExists), after which the next read sees the winner, whose write is a
	// change observed: a live holder.
	//
	// Times (the same rule in Renew): before is read before the read, now after it. Everything
	// about the Lease as read (when this record was first seen, whether it has gone unchanged
	// long enough, the AcquireTime and RenewTime written into it) uses now, so no read latency
	// (or pause during the read) makes the Lease look older than it is. Our own deadline
	// (setRenewed) counts from before, the earlier, which is surely before the write was sent.
	var (
		observed   string // the record as last read; "" before the first read
		observedAt time.Time
		lastErr    error
		conflicts  int
	)
	for {
		before := h.clock.Now()
		l, err := h.get(ctx)
		now := h.clock.Now()
		if err != nil && !apierrors.IsNotFound(err) {
			return h.wrap("read", err)
		}
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name:        h.Name(),
				Namespace:   h.namespace,
				Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: h.key.Hash()},
				Annotations: map[string]string{AnnotationRolloutKey: h.key.String()},
			}}
			h.take(l, now)
			u, cerr := toUnstructured(l)
			if cerr != nil {
				return cerr
			}
			err = createInNamespace(ctx, h.c, u)
			observed, observedAt = observedRecord(nil), now
		} else {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			if holder != "" && holder != h.holder {
				rec := observedRecord(l)
				if observed != "" && rec != observed {
					return &HeldError{Key: h.key, Holder: holder, Since: leaseSince(l), Duration: leaseDuration(l, h.duration)}
				}
				if observed == "" {
					observed, observedAt = rec, now
				}
				wait := leaseDuration(l, h.duration)
				wait += takeoverMargin(wait)
				if left := observedAt.Add(wait).Sub(now); left > 0 {
					if err := sleep(ctx, h.clock, min(h.poll, left)); err != nil {
						return h.wrap("wait for", fmt.Errorf("held by %s: %w", holder, err))
					}
					continue
				}
				// Unchanged for its whole duration and margin by our clock: its holder is gone.
				l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
			} else if holder == "" && l.Spec.AcquireTime != nil {
				l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
			}
			observed, observedAt = observedRecord(l), now
			h.take(l, now)
			err = h.update(ctx, l)
		}
		if err == nil {
			h.setRenewed(before)
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return h.wrap("write", err)
		}
		lastErr = err
		if conflicts++; conflicts >= conflictBackoff.Steps {
			return h.wrap("write", fmt.Errorf("gave up after %d conflicting writes: %w", conflicts, lastErr))
		}
	}
}

// take writes h as the holder into l: acquired now unless h held it already.
func (h *Held) take(l *coordinationv1.Lease, now time.Time) {
	t := metav1.NewMicroTime(now)
	if ptr.Deref(l.Spec.HolderIdentity, "") != h.holder || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	l.Spec.HolderIdentity = ptr.To(h.holder)
	l.Spec.RenewTime = &t
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.duration / time.Second))
}

// Renew extends the Lease by its duration from now. It fails with ErrLeaseLost when another
// holder took the Lease or it was deleted, or when the Held is lost already (a lost Lease is
// never renewed back); the Held is then done.
func (h *Held) Renew(ctx context.Context) error {
	if err := h.Err(); err != nil {
		return err
	}
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		before := h.clock.Now() // our deadline's base: see acquire for the rule
		l, err := h.check(ctx)
		if err != nil {
			return err
		}
		h.take(l, h.clock.Now()) // stamped after the read
		if err := h.update(ctx, l); err != nil {
			return err
		}
		h.setRenewed(before)
		return nil
	})
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return h.wrap("renew", err)
	}
	return err
}

// check reads the Lease and fails with ErrLeaseLost (and the Held done) when it was deleted or
// another holder has it.
func (h *Held) check(ctx context.Context) (*coordinationv1.Lease, error) {
	l, err := h.get(ctx)
	if apierrors.IsNotFound(err) {
		return nil, h.lost(fmt.Errorf("%w: Lease %s/%s of %s was deleted", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe()))
	}
	if err != nil {
		return nil, err
	}
	if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != h.holder {
		if holder == "" {
			return nil, h.lost(fmt.Errorf("%w: Lease %s/%s of %s was released by someone else", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe()))
		}
		return nil, h.lost(fmt.Errorf("%w: Lease %s/%s of %s was taken over by %q", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe(), holder))
	}
	return l, nil
}

// loop renews the Lease every third of its duration and reads it every poll interval in
// between, until stopped or the Lease is lost. Renewals that keep failing lose the Lease once
// its duration has passed since the last successful one, by this process's clock: by then a
// contender may take it over.
func (h *Held) loop(ctx context.Context) {
	defer close(h.stopped)
	every := h.duration / 3
	var lastErr error
	for {
		deadline := h.RenewedAt().Add(h.duration)
		now := h.clock.Now()
		if !now.Before(deadline) {
			_ = h.lost(h.expired(lastErr))
			return
		}
		if err := sleep(ctx, h.clock, min(h.poll, deadline.Sub(now))); err != nil {
			return // stopped
		}
		now = h.clock.Now()
		if now.Sub(h.RenewedAt()) < every {
			// Between renewals: a read notices a takeover or deletion early.
			rctx, cancel := context.WithTimeout(ctx, h.poll)
			_, err := h.check(rctx)
			cancel()
			if errors.Is(err, ErrLeaseLost) {
				return
			}
			continue
		}
		left := h.RenewedAt().Add(h.duration).Sub(now)
		if left <= 0 {
			continue // lost: said at the top
		}
		rctx, cancel := context.WithTimeout(ctx, min(every, left))
		err := h.Renew(rctx)
		cancel()
		switch {
		case errors.Is(err, ErrLeaseLost):
			return
		case ctx.Err() != nil:
			return // stopped
		case err != nil:
			lastErr = err // tried again next poll while the Lease has not expired
		}
	}
}

// expired is the loss of a Lease not renewed for its duration by this process's clock; lastErr
// is the last renewal's failure, if one failed.
func (h *Held) expired(lastErr error) error {
	if lastErr == nil {
		return fmt.Errorf("%w: Lease %s/%s of %s was not renewed for %s by this process's clock (paused or cut off?); it may be taken over now",
			ErrLeaseLost, h.namespace, h.Name(), h.key.Describe(), h.duration)
	}
	return fmt.Errorf("%w: Lease %s/%s of %s could not be renewed for %s (it may be taken over now): %v",
		ErrLeaseLost, h.namespace, h.Name(), h.key.Describe(), h.duration, lastErr)
}

// Valid is the write fence: every write made under the Lease calls it right before writing,
// and writes only on nil. It makes no API call. It is nil while the Lease is held by this
// process's own clock: not lost, not released, and renewed less than its duration ago (from
// when the last renewal began). Otherwise it returns an error wrapping ErrLeaseLost; when the
// duration has passed it first marks the Held lost with it, so Done and Fence fire.
//
// Valid catches what the renew loop may notice only later: a process paused (SIGSTOP, a
// suspended VM) past its Lease's duration resumes with its goroutines runnable in any order,
// and its next write must not go out.
//
// No two processes write at once because:
//   - the holder stops writing (Valid fails) once its duration has passed since its last
//     renewal began: renewedAt is taken before the renewal's read and write are sent, so it
//     is no later than when the renewed record reached the API server;
//   - a contender takes over only after seeing the record unchanged, by its own clock, for
//     the duration plus takeoverMargin, counted from after the read that first showed it, so
//     no earlier than when that record reached the server. The margin covers the holder's
//     in-flight writes (request latency) and clock-rate drift between the two processes.
func (h *Held) Valid() error {
	h.mu.Lock()
	err, released, renewedAt := h.err, h.released, h.renewedAt
	h.mu.Unlock()
	switch {
	case err != nil:
		return err
	case released:
		return fmt.Errorf("%w: Lease %s/%s of %s was released", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe())
	case h.clock.Now().Sub(renewedAt) < h.duration:
		return nil
	}
	return h.lost(h.expired(nil))
}

// Fence returns a context derived from parent that is cancelled, with the loss as its cause
// (an error wrapping ErrLeaseLost, saying why), when the Lease is lost. Work that must stop
// once another process may hold the Lease runs on it. cancel releases its resources; Release
// does not cancel it (the work ends first, then releases). The context is cancelled only once
// the loss is noticed (by the renew loop or Valid): writes check Valid too.
func (h *Held) Fence(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(parent)
	go func() {
		select {
		case <-h.done:
			if err := h.Err(); err != nil {
				cancelCause(err)
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancelCause(context.Canceled) }
}

// Release stops the renewals and deletes the Lease (unless another holder has taken it since),
// so the next apply need not wait for it to expire. Valid fails from its start. Releasing
// twice does nothing.
func (h *Held) Release(ctx context.Context) error {
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
	h.stop()
	<-h.stopped
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		l, err := h.get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") != h.holder {
			return nil
		}
		u, err := toUnstructured(l)
		if err != nil {
			return err
		}
		// Preconditions: a takeover between the read and the delete is a conflict, not a loss.
		err = h.c.Delete(ctx, u, client.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	h.finish(nil)
	if err != nil {
		return h.wrap("release", err)
	}
	return nil
}

// Done is closed when the Lease is released or lost; Err then says which.
func (h *Held) Done() <-chan struct{} { return h.done }

// Err is nil while the Lease is held and after Release; it wraps ErrLeaseLost once lost.
func (h *Held) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Holder is the identity holding the Lease.
func (h *Held) Holder() string { return h.holder }

// Name is the Lease's name.
func (h *Held) Name() string { return h.key.ObjectName() }

// RenewedAt is when the Lease was last acquired or renewed: the time taken before that
// acquisition's or renewal's read and write were sent.
func (h *Held) RenewedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewedAt
}

// setRenewed records a successful acquisition or renewal begun at t, the base of the holder's
// deadline (t+duration). t must be taken before the write is sent (before the read that
// precedes it, in fact): a contender counts from when it sees the write, later still. A renewal
// finishing after a later-begun one does not move it back.
func (h *Held) setRenewed(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.After(h.renewedAt) {
		h.renewedAt = t
	}
}

// lost records err (wrapping ErrLeaseLost), closes Done and stops the renewals (a lost Lease
// is not renewed back); it returns err.
func (h *Held) lost(err error) error {
	h.finish(err)
	h.stop()
	return err
}

func (h *Held) finish(err error) {
	h.doneOnce.Do(func() {
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
		close(h.done)
	})
}

func (h *Held) wrap(what string, err error) error {
	return fmt.Errorf("%s Lease %s/%s of %s: %w", what, h.namespace, h.Name(), h.key.Describe(), err)
}

func (h *Held) get(ctx context.Context) (*coordinationv1.Lease, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(leaseGVK)
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.namespace, Name: h.Name()}, u); err != nil {
		return nil, err
	}
	l := &coordinationv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l); err != nil {
		return nil, fmt.Errorf("decode Lease %s/%s: %w", h.namespace, h.Name(), err)
	}
	if got := l.Annotations[AnnotationRolloutKey]; got != h.key.String() {
		return nil, fmt.Errorf("Lease %s/%s should be that of %s but belongs to %q", h.namespace, h.Name(), h.key.Describe(), got)
	}
	return l, nil
}

func (h *Held) update(ctx context.Context, l *coordinationv1.Lease) error {
	u, err := toUnstructured(l)
	if err != nil {
		return err
	}
	return h.c.Update(ctx, u)
}

// toUnstructured converts a Lease for the client: as unstructured it needs no scheme
// registration, so the callers' clients work whatever types they were built with.
func toUnstructured(l *coordinationv1.Lease) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
	if err != nil {
		return nil, fmt.Errorf("encode Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(leaseGVK)
	return u, nil
}

func leaseSince(l *coordinationv1.Lease) time.Time {
	if l.Spec.AcquireTime != nil {
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}

// leaseDuration is the Lease's duration, or def when it has none.
func leaseDuration(l *coordinationv1.Lease, def time.Duration) time.Duration {
	if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d > 0 {
		return time.Duration(d) * time.Second
	}
	return def
}
