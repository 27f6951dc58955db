package delivery

import (
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// What the external tests (package delivery_test, which may import the resources that import
// delivery) reach of the package's unexported parts.
var (
	Redact        = redact
	RevisionClass = revisionClass
)

// revisionClass is the engine class blame gives err (nil: unsettled), as classify marks it.
func revisionClass(err error) error {
	switch blame.Of(err).Class {
	case blame.Revision:
		return engine.ErrRevisionFailed
	case blame.Refused:
		return engine.ErrChangeRefused
	case blame.Gone:
		return engine.ErrTargetGone
	}
	return nil
}

// RedactedText is what stands in for a hidden value.
const RedactedText = redactedText
