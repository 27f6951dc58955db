// Package usererr carries errors meant for the person running Terraform: a short Title-Case
// summary and a detail that says what happened and what to do. Packages below the Terraform glue
// return them; internal/diagnostics turns them into plan/apply diagnostics.
package usererr

import "errors"

// Error is an error with a summary and an actionable detail. Neither may contain credentials.
type Error struct {
	Summary string
	Detail  string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Summary + ": " + e.Detail + ": " + e.Err.Error()
	}
	return e.Summary + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an Error with the given summary and detail.
func New(summary, detail string) *Error { return &Error{Summary: summary, Detail: detail} }

// Wrap returns an Error with the given summary and detail that wraps err.
func Wrap(err error, summary, detail string) *Error {
	return &Error{Summary: summary, Detail: detail, Err: err}
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
