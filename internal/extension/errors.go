package extension

import (
	"errors"
	"fmt"
	"strings"
)

// Kind says what went wrong with a call.
type Kind string

const (
	// KindConfig: the endpoint is misconfigured (URL, timeout, CA bundle); nothing was sent.
	KindConfig Kind = "config"
	// KindInsecureURL: the URL is plain HTTP where only HTTPS is allowed; nothing was sent.
	KindInsecureURL Kind = "insecure-url"
	// KindTimeout: no complete answer within the call's timeout.
	KindTimeout Kind = "timeout"
	// KindCancelled: the caller's context ended the call.
	KindCancelled Kind = "cancelled"
	// KindConnection: the extension could not be reached (refused, TLS, reset), retries spent.
	KindConnection Kind = "connection"
	// KindRedirect: the extension answered 3xx; redirects are never followed.
	KindRedirect Kind = "redirect"
	// KindStatus: an HTTP status other than 200 (after retries, for 5xx).
	KindStatus Kind = "http-status"
	// KindTooLarge: the answer exceeded the response size cap.
	KindTooLarge Kind = "too-large"
	// KindMalformed: the answer is not the hook's response type.
	KindMalformed Kind = "malformed"
	// KindFailure: a well-formed answer with status Failure.
	KindFailure Kind = "failure"
)

// Error is a failed extension call.
type Error struct {
	// Extension is the endpoint's name; URL its base URL.
	Extension, URL string
	// Hook and Handler say what was called (Handler is "" for Discovery and configuration errors).
	Hook, Handler string
	Kind          Kind
	// StatusCode is the HTTP status when one was received.
	StatusCode int
	// Message is the extension's own message of a Failure answer, truncated.
	Message string
	// Detail says what happened, with anything the extension wrote truncated.
	Detail string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "extension %q", e.Extension)
	if e.Hook != "" {
		b.WriteString(" " + e.Hook)
		if e.Handler != "" {
			b.WriteString(" handler " + e.Handler)
		}
	}
	if e.URL != "" {
		fmt.Fprintf(&b, " (%s)", e.URL)
	}
	b.WriteString(": " + e.Detail)
	return b.String()
}

// KindOf is the Kind of an *Error in err's chain, or "" when there is none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
