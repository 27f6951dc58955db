package delivery

import (
	"cmp"
	"slices"
	"strings"
)

// redactedText replaces what an error message says of sensitive values.
const redactedText = "(sensitive value)"

// redacted is an error whose message has the values of Spec.Redact replaced: an API server
// may echo an object it refused ("Invalid value: ..."), and error messages reach diagnostics,
// the ledger (and so the state's invalid_revisions), the progress record and logs. It unwraps
// to the original, so that its class (revisionClass) is still found.
type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// redact returns err with values replaced in its message; err itself when none occurs.
func redact(err error, values []string) error {
	if err == nil || len(values) == 0 {
		return err
	}
	msg := err.Error()
	// Longest first, so that a value containing another is replaced whole.
	sorted := slices.SortedFunc(slices.Values(values), func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	out := msg
	for _, v := range sorted {
		if v != "" {
			out = strings.ReplaceAll(out, v, redactedText)
		}
	}
	if out == msg {
		return err
	}
	return &redacted{err: err, msg: out}
}
