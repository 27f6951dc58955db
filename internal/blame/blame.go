// Package blame decides whose fault a failure is: the revision's, the infrastructure's, or
// unknown. It is the one classifier of the project: direct delivery, delivery through Flux and
// in-place updates hand it what they saw (an error, a Flux condition, a cluster gate read before
// and after the change) and act on the Verdict it returns.
//
// The rules (ARCHITECTURE.md, "Blame") err on the side of the revision's innocence, because a
// revision recorded invalid is refused on every cluster from then on, while an unsettled cluster
// is only applied again by the next run:
//
//   - Revision: the cluster answered and its answer was about the revision's own objects — the
//     API server refused them as invalid or an admission policy denied them, an object reported
//     kstatus Failed (a Deployment's ProgressDeadlineExceeded), every object was read and some
//     were still not ready when the verify timeout ran out, a kind or namespace the bundle needs
//     is missing, a health check or check Job failed, an HTTP check answered with a wrong status
//     that a gateway does not send, a cluster gate that was healthy before the change and is not
//     after it on a signal the revision can move (a Node's kubelet reporting NotReady), an
//     in-place update Cluster API did not finish within the verify timeout (ErrNotUpToDate).
//   - Refused: the change was stopped for a reason that is not the revision's health (fields
//     another manager owns): restored, counted, never recorded invalid.
//   - Gone: the target left the fleet.
//   - Infrastructure: the cluster or the path to it failed — no answer, 5xx, throttling,
//     timeouts, RBAC refusals, gateways answering 502/503/504, some reads of a verify failing
//     (a brownout), a Flux source or controller that did not get to the revision.
//   - Unknown: nothing tells. Treated as infrastructure by the engine (unsettled, counted
//     against max_unsettled, halts), never as the revision's failure.
package blame

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// ErrNotUpToDate marks an in-place update that Cluster API, reachable all along, did not finish
// within the verify timeout (the machines' spec or status not at the new version): the change's
// failure on that cluster. An API server that could not be reached is not this.
var ErrNotUpToDate = errors.New("not up to date within the verify timeout")

// Class is whose fault a failure is.
type Class int

const (
	// Unknown: nothing tells; the cluster is left unsettled.
	Unknown Class = iota
	// Infrastructure: the cluster, the network, the runner or the delivery engine failed.
	Infrastructure
	// Revision: the revision's own objects failed; restored and recorded invalid.
	Revision
	// Refused: the change was refused for a reason that is not the revision's health.
	Refused
	// Gone: the target left the fleet.
	Gone
)

func (c Class) String() string {
	switch c {
	case Infrastructure:
		return "infrastructure"
	case Revision:
		return "revision"
	case Refused:
		return "refused"
	case Gone:
		return "gone"
	}
	return "unknown"
}

// Verdict is a Class with the rule that decided it and the evidence it read (the object, the
// condition, the reason).
type Verdict struct {
	Class Class
	// Rule names the rule that decided (stable words, shown in the verdict and in tests).
	Rule string
	// Evidence is what the rule read, in one line.
	Evidence string
}

func (v Verdict) String() string {
	if v.Evidence == "" {
		return fmt.Sprintf("%s (%s)", v.Class, v.Rule)
	}
	return fmt.Sprintf("%s (%s: %s)", v.Class, v.Rule, v.Evidence)
}

// Of classifies err by the rules in the package doc.
func Of(err error) Verdict {
	switch {
	case err == nil:
		return Verdict{Class: Unknown, Rule: "no error"}
	case errors.Is(err, engine.ErrTargetGone):
		return Verdict{Class: Gone, Rule: "target gone"}
	case errors.Is(err, engine.ErrRevisionFailed):
		return Verdict{Class: Revision, Rule: "marked where it arose", Evidence: firstLine(err.Error())}
	case errors.Is(err, engine.ErrChangeRefused):
		return Verdict{Class: Refused, Rule: "marked where it arose", Evidence: firstLine(err.Error())}
	case errors.Is(err, ErrNotUpToDate):
		return Verdict{Class: Revision, Rule: "change not finished in time", Evidence: firstLine(err.Error())}
	}
	var (
		notReady *apply.NotReadyError
		check    *apply.CheckError
		conflict *apply.ConflictError
		answer   *HTTPAnswerError
		flux     *FluxError
	)
	switch {
	case errors.As(err, &notReady):
		return notReadyVerdict(notReady)
	case errors.As(err, &check):
		return Verdict{Class: Revision, Rule: "needs what the cluster lacks", Evidence: firstLine(check.Error())}
	case errors.As(err, &conflict):
		return Verdict{Class: Refused, Rule: "fields owned by another manager", Evidence: firstLine(conflict.Error())}
	case errors.As(err, &answer):
		return answer.verdict()
	case errors.As(err, &flux):
		return flux.Verdict
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apiVerdict(status.Status())
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Verdict{Class: Infrastructure, Rule: "timed out", Evidence: firstLine(err.Error())}
	case errors.As(err, &netErr):
		return Verdict{Class: Infrastructure, Rule: "no answer", Evidence: firstLine(err.Error())}
	}
	return Verdict{Class: Unknown, Rule: "nothing tells", Evidence: firstLine(err.Error())}
}

// Mark returns err marked with the engine class of its verdict, so that the engine restores and
// records what the verdict says. Infrastructure and Unknown leave err as it is (the engine's
// default: unsettled).
func Mark(err error) error {
	if err == nil {
		return nil
	}
	v := Of(err)
	var class error
	switch v.Class {
	case Revision:
		class = engine.ErrRevisionFailed
	case Refused:
		class = engine.ErrChangeRefused
	case Gone:
		class = engine.ErrTargetGone
	default:
		return err
	}
	if errors.Is(err, class) {
		return err
	}
	return engine.Mark(class, err)
}

// IsSettled reports whether err carries a verdict that waiting and retrying cannot change
// (revision, refused, gone); an infrastructure or unknown failure may pass with time.
func IsSettled(err error) bool {
	switch Of(err).Class {
	case Revision, Refused, Gone:
		return true
	}
	return false
}

// notReadyVerdict: an object that failed is the revision's; a wait during which some objects
// could not be read says nothing (a brownout: the ones read may only be late because the server
// is slow); every object read and some not ready in time is the revision's.
func notReadyVerdict(e *apply.NotReadyError) Verdict {
	unread := 0
	for _, s := range e.Objects {
		if s.Unreadable {
			unread++
			continue
		}
		if s.Status == "Failed" {
			return Verdict{Class: Revision, Rule: "object failed", Evidence: s.String()}
		}
	}
	switch {
	case unread == len(e.Objects) && unread > 0:
		return Verdict{Class: Infrastructure, Rule: "no object readable", Evidence: firstLine(e.Objects[0].String())}
	case unread > 0:
		return Verdict{Class: Infrastructure, Rule: "some reads failed",
			Evidence: fmt.Sprintf("%d of %d objects unreadable when the wait ended", unread, len(e.Objects))}
	case len(e.Objects) == 0:
		return Verdict{Class: Unknown, Rule: "nothing tells", Evidence: e.Error()}
	}
	return Verdict{Class: Revision, Rule: "not ready in time", Evidence: firstLine(e.Objects[0].String())}
}

// apiVerdict classifies an API server's refusal by its status reason.
func apiVerdict(s metav1.Status) Verdict {
	evidence := fmt.Sprintf("%d %s: %s", s.Code, s.Reason, firstLine(s.Message))
	switch s.Reason {
	case metav1.StatusReasonInvalid, metav1.StatusReasonBadRequest, metav1.StatusReasonRequestEntityTooLarge:
		return Verdict{Class: Revision, Rule: "refused as invalid", Evidence: evidence}
	case metav1.StatusReasonForbidden:
		if DeniedByPolicy(s.Message) {
			return Verdict{Class: Revision, Rule: "denied by admission", Evidence: evidence}
		}
		return Verdict{Class: Infrastructure, Rule: "forbidden to the runner", Evidence: evidence}
	}
	switch {
	case s.Code == 422 || s.Code == 400 || s.Code == 413:
		return Verdict{Class: Revision, Rule: "refused as invalid", Evidence: evidence}
	case s.Code == 429:
		return Verdict{Class: Infrastructure, Rule: "throttled", Evidence: evidence}
	case s.Code >= 500:
		return Verdict{Class: Infrastructure, Rule: "server error", Evidence: evidence}
	}
	return Verdict{Class: Infrastructure, Rule: "refused, not for the objects' content", Evidence: evidence}
}

// DeniedByPolicy tells an admission denial (the objects broke a rule) from an RBAC refusal (the
// runner's credentials lack rights), which share the 403 status and the Forbidden reason: the
// API server words the two differently, and nothing else in the status tells them apart.
func DeniedByPolicy(message string) bool {
	for _, s := range []string{"admission webhook", "denied the request", "ValidatingAdmissionPolicy", "denied request"} {
		if strings.Contains(message, s) {
			return true
		}
	}
	return false
}

// firstLine is s up to its first newline, at most 300 bytes.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	return line
}
