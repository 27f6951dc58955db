package blame

import (
	"fmt"
	"net/http"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HTTPAnswerError is a failed HTTP check (verify.http_checks): the last status it got (0: the
// check was never answered) and the one it wanted.
type HTTPAnswerError struct {
	Status, Want int
	Err          error
}

func (e *HTTPAnswerError) Error() string { return e.Err.Error() }
func (e *HTTPAnswerError) Unwrap() error { return e.Err }

// Gateway reports whether status is what a proxy or load balancer in front of the app answers
// when it cannot reach it (502, 503, 504) or when it sheds load (429): it says the path is
// unhealthy, not that the app answered wrong.
func Gateway(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

func (e *HTTPAnswerError) verdict() Verdict {
	switch {
	case e.Status == 0:
		return Verdict{Class: Infrastructure, Rule: "check not answered", Evidence: firstLine(e.Error())}
	case Gateway(e.Status):
		return Verdict{Class: Infrastructure, Rule: "gateway answered", Evidence: fmt.Sprintf("status %d, want %d", e.Status, e.Want)}
	}
	return Verdict{Class: Revision, Rule: "check answered wrong", Evidence: fmt.Sprintf("status %d, want %d", e.Status, e.Want)}
}

// FluxError is a Kustomization that did not get a revision ready, with the verdict that
// FluxCondition gave it.
type FluxError struct {
	Verdict Verdict
	Err     error
}

func (e *FluxError) Error() string { return e.Err.Error() }
func (e *FluxError) Unwrap() error { return e.Err }

// FluxCondition is what kustomize-controller reported of a revision in a Kustomization's Ready
// condition.
type FluxCondition struct {
	// Attempted says kustomize-controller started on this revision (lastAttemptedRevision).
	Attempted bool
	// Ready is the condition's status: "True", "False" or "Unknown".
	Ready, Reason, Message string
}

// dryRunReason finds the API server's status reason that fluxcd/pkg/ssa puts in a failed dry
// run's message ("<object> dry-run failed (<StatusReason>): ..."): the reason is the API
// server's, carried in the message because a Kustomization's condition has one reason field,
// which kustomize-controller fills with its own.
var dryRunReason = regexp.MustCompile(`dry-run failed \(([A-Za-z]+)\)`)

// FluxConditionVerdict classifies a Kustomization's verdict on a revision it attempted and did
// not get ready. final says the wait for it is over. It returns the class and the rule, or
// Unknown with rule "still at work" while Flux may yet get there (Flux retries every
// retryInterval, so a passing fault clears by itself).
func FluxConditionVerdict(c FluxCondition, final bool) Verdict {
	evidence := fmt.Sprintf("Ready %s (%s): %s", c.Ready, c.Reason, firstLine(c.Message))
	if c.Attempted && c.Ready == "False" {
		switch c.Reason {
		case "HealthCheckFailed":
			return Verdict{Class: Revision, Rule: "health check failed in Flux", Evidence: evidence}
		case "BuildFailed":
			// The provider parsed and checked these manifests at plan, so a build that fails
			// once is as likely kustomize-controller's own trouble (its temporary directory
			// gone mid-build was seen in CI) as the content's. Flux retries every retryInterval:
			// only a build that still fails when the wait is over is the revision's.
			if !final {
				return Verdict{Class: Unknown, Rule: "still at work", Evidence: evidence}
			}
			return Verdict{Class: Revision, Rule: "revision does not build", Evidence: evidence}
		case "ReconciliationFailed":
			if m := dryRunReason.FindStringSubmatch(c.Message); m != nil {
				v := apiVerdict(statusOfReason(m[1], c.Message))
				if v.Class == Revision {
					v.Evidence = evidence
					return v
				}
				if !final {
					return Verdict{Class: Unknown, Rule: "still at work", Evidence: evidence}
				}
				v.Evidence = evidence
				return v
			}
			if final {
				return Verdict{Class: Infrastructure, Rule: "reconciliation failed, not on the objects", Evidence: evidence}
			}
			return Verdict{Class: Unknown, Rule: "still at work", Evidence: evidence}
		}
	}
	if !final {
		return Verdict{Class: Unknown, Rule: "still at work", Evidence: evidence}
	}
	switch {
	case c.Attempted && c.Ready == "False":
		return Verdict{Class: Revision, Rule: "not ready in time", Evidence: evidence}
	case c.Attempted:
		// kustomize-controller's own timeout ends before the verify timeout, so a controller at
		// work would have given a verdict by now: it stopped mid-reconcile.
		return Verdict{Class: Infrastructure, Rule: "controller gave no verdict", Evidence: evidence}
	}
	return Verdict{Class: Infrastructure, Rule: "revision never attempted", Evidence: evidence}
}

// statusOfReason rebuilds the API status a dry run failed with from its reason, for apiVerdict.
func statusOfReason(reason, message string) metav1.Status {
	codes := map[metav1.StatusReason]int32{
		metav1.StatusReasonInvalid: 422, metav1.StatusReasonBadRequest: 400, metav1.StatusReasonRequestEntityTooLarge: 413,
		metav1.StatusReasonForbidden: 403, metav1.StatusReasonUnauthorized: 401, metav1.StatusReasonNotFound: 404,
		metav1.StatusReasonConflict: 409, metav1.StatusReasonAlreadyExists: 409, metav1.StatusReasonTooManyRequests: 429,
		metav1.StatusReasonInternalError: 500, metav1.StatusReasonServerTimeout: 500,
		metav1.StatusReasonServiceUnavailable: 503, metav1.StatusReasonTimeout: 504,
	}
	r := metav1.StatusReason(reason)
	return metav1.Status{Reason: r, Message: message, Code: codes[r]}
}
