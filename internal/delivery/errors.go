package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The engine acts on an error by its class (engine.ErrRevisionFailed, ErrChangeRefused,
// ErrTargetGone; anything else is an infrastructure failure). Only delivery can tell them apart,
// and it errs on the side of the revision's innocence: an error is blamed on the revision only
// when the cluster answered and said no, because a revision recorded invalid is refused on
// every cluster from then on.

// revisionClass returns the engine class of err as far as err itself tells (nil: an
// infrastructure failure, or unknown).
func revisionClass(err error) error {
	var (
		notReady *apply.NotReadyError
		check    *apply.CheckError
		conflict *apply.ConflictError
		http     *httpCheckError
	)
	switch {
	case errors.As(err, &notReady):
		if notReady.Unreadable() {
			return nil // no object could be read: the cluster failed, not the objects
		}
		return engine.ErrRevisionFailed
	case errors.As(err, &check):
		return engine.ErrRevisionFailed // kinds or namespaces the bundle needs are missing
	case errors.As(err, &conflict):
		return engine.ErrChangeRefused // fields another manager owns: not the revision's health
	case errors.As(err, &http):
		if http.answered {
			return engine.ErrRevisionFailed
		}
		return nil // the runner could not reach the check at all
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return engine.ErrRevisionFailed // schema or validation: the objects are wrong
	case apierrors.IsForbidden(err) && deniedByPolicy(status.Status().Message):
		return engine.ErrRevisionFailed // an admission webhook or policy refused the objects
	}
	return nil // 401, RBAC 403, 404, 409, 429, 5xx, timeouts: the cluster, not the revision
}

// deniedByPolicy tells an admission denial (the objects broke a rule) from an RBAC refusal (our
// credentials lack rights), which share the 403 status.
func deniedByPolicy(message string) bool {
	for _, s := range []string{"admission webhook", "denied the request", "ValidatingAdmissionPolicy", "denied request"} {
		if strings.Contains(message, s) {
			return true
		}
	}
	return false
}

// goneCheckTimeout bounds the management cluster reads that decide whether a cluster that
// failed has left the fleet.
const goneCheckTimeout = 10 * time.Second

// classify marks err, returned while working on target, with its engine class. An error that
// is not the revision's is checked against the management cluster: a Cluster (or its
// kubeconfig Secret) deleted mid-rollout makes the target gone.
func (w *world) classify(ctx context.Context, target string, err error) error {
	if err == nil || errors.Is(err, engine.ErrTargetGone) || errors.Is(err, engine.ErrRevisionFailed) || errors.Is(err, engine.ErrChangeRefused) {
		return err
	}
	if class := revisionClass(err); class != nil {
		return engine.Mark(class, err)
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), goneCheckTimeout)
	defer cancel()
	if reason, gerr := w.svc.goneOf(gctx, w.spec.ClusterNamespace, target); gerr == nil && reason != "" {
		return engine.Mark(engine.ErrTargetGone, fmt.Errorf("%s (%w)", reason, err))
	}
	return err
}

// maxRetryWait caps the wait between retries of an infrastructure failure.
const maxRetryWait = 15 * time.Second

// retry runs op until it succeeds, fails for a reason other than the infrastructure (the
// revision, a refused change, a vanished cluster), or ctx ends; infrastructure failures are
// retried with exponential backoff. It returns op's last error, classified.
func (w *world) retry(ctx context.Context, target string, op func(ctx context.Context) error) error {
	wait := w.svc.retryWait
	for {
		if err := records.Fenced(ctx); err != nil {
			return err // the Lease is lost: nothing more is written, and waiting will not win it back
		}
		err := w.classify(ctx, target, redact(op(ctx), w.spec.Redact))
		if err == nil || errors.Is(err, engine.ErrTargetGone) || errors.Is(err, engine.ErrRevisionFailed) || errors.Is(err, engine.ErrChangeRefused) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		w.logf(fmt.Sprintf("%s: %v; retrying in %s", target, firstLine(err.Error()), wait), map[string]any{"cluster": target})
		if serr := w.svc.clock.Sleep(ctx, wait); serr != nil {
			return err
		}
		wait = min(2*wait, maxRetryWait)
	}
}
