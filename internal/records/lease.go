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

// HeldError says that another process holds a rollout's Lease.
type HeldError struct {
	Key    Key
	Holder string
	// Since is when the holder acquired the Lease; Expires when it expires unless renewed.
	Since   time.Time
	Expires time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is being applied by %s since %s; lease expires at %s if that process died",
		e.Key.Describe(), e.Holder, e.Since.UTC().Format(time.RFC3339), e.Expires.UTC().Format(time.RFC3339))
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
// Release (or until it is lost: see Done).
type Held struct {
	c         client.Client
	namespace string
	key       Key
	holder    string
	duration  time.Duration
	clock     Clock

	mu        sync.Mutex
	renewedAt time.Time
	err       error

	stop     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{} // closed when the renew loop has returned
	done     chan struct{} // closed when the lease is lost or released
	doneOnce sync.Once
}

// Acquire takes the rollout's Lease in namespace of the management cluster for holder. It
// succeeds when the Lease is absent, released, expired (renew time + duration before now) or
// already held by holder; otherwise it returns a *HeldError naming the holder. duration is
// rounded up to whole seconds and must be at least one. The namespace is created if missing.
// The background renewals outlive ctx (an apply being cancelled must still hold the Lease
// while it brings clusters to a recorded state): they stop on Release.
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
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	go h.loop(context.WithoutCancel(ctx))
	return h, nil
}

func (h *Held) acquire(ctx context.Context) error {
	// Each round reads the Lease and writes it guarded by what it read; losing a race is a
	// conflict (or AlreadyExists), after which the next read sees the winner.
	var lastErr error
	for range conflictBackoff.Steps {
		now := h.clock.Now()
		l, err := h.get(ctx)
		switch {
		case apierrors.IsNotFound(err):
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
		case err != nil:
			return h.wrap("read", err)
		default:
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			if holder != "" && holder != h.holder && !leaseExpires(l).Before(now) {
				return &HeldError{Key: h.key, Holder: holder, Since: leaseSince(l), Expires: leaseExpires(l)}
			}
			if holder != h.holder {
				l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
			}
			h.take(l, now)
			err = h.update(ctx, l)
		}
		if err == nil {
			h.setRenewed(now)
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return h.wrap("write", err)
		}
		lastErr = err
	}
	return h.wrap("write", fmt.Errorf("gave up after %d conflicting writes: %w", conflictBackoff.Steps, lastErr))
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
// holder took the Lease or it was deleted; the Held is then done.
func (h *Held) Renew(ctx context.Context) error {
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		now := h.clock.Now()
		l, err := h.get(ctx)
		if apierrors.IsNotFound(err) {
			return h.lost(fmt.Errorf("%w: Lease %s/%s of %s was deleted", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe()))
		}
		if err != nil {
			return err
		}
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != h.holder {
			return h.lost(fmt.Errorf("%w: Lease %s/%s of %s is now held by %q", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe(), holder))
		}
		h.take(l, now)
		if err := h.update(ctx, l); err != nil {
			return err
		}
		h.setRenewed(now)
		return nil
	})
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return h.wrap("renew", err)
	}
	return err
}

func (h *Held) loop(ctx context.Context) {
	defer close(h.stopped)
	every := h.duration / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		err := h.Renew(rctx)
		cancel()
		switch {
		case errors.Is(err, ErrLeaseLost):
			return
		case err != nil && h.clock.Now().After(h.RenewedAt().Add(h.duration)):
			_ = h.lost(fmt.Errorf("%w: Lease %s/%s of %s expired while renewals failed: %v", ErrLeaseLost, h.namespace, h.Name(), h.key.Describe(), err))
			return
		}
		// Other errors: the next tick tries again while the Lease has not expired.
	}
}

// Release stops the renewals and deletes the Lease (unless another holder has taken it since),
// so the next apply need not wait for it to expire. Releasing twice does nothing.
func (h *Held) Release(ctx context.Context) error {
	h.stopOnce.Do(func() { close(h.stop) })
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

// RenewedAt is when the Lease was last acquired or renewed.
func (h *Held) RenewedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewedAt
}

func (h *Held) setRenewed(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewedAt = t
}

// lost records err (wrapping ErrLeaseLost) and closes Done; it returns err.
func (h *Held) lost(err error) error {
	h.finish(err)
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

// leaseExpires is renew time (else acquire time, else creation) plus the lease duration.
func leaseExpires(l *coordinationv1.Lease) time.Time {
	t := leaseSince(l)
	if l.Spec.RenewTime != nil {
		t = l.Spec.RenewTime.Time
	}
	return t.Add(time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second)
}
