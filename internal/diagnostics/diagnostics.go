// Package diagnostics turns errors into Terraform diagnostics with one wording: a Title-Case
// summary and a detail that says what happened and what to do.
package diagnostics

import (
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// FromError returns an error diagnostic for err. A usererr.Error keeps its own summary and
// detail; any other error is reported under fallbackSummary.
func FromError(err error, fallbackSummary string) diag.Diagnostic {
	summary, detail := parts(err, fallbackSummary)
	return diag.NewErrorDiagnostic(summary, detail)
}

// AttributeFromError is FromError attached to an attribute, so the CLI points at it.
func AttributeFromError(p path.Path, err error, fallbackSummary string) diag.Diagnostic {
	summary, detail := parts(err, fallbackSummary)
	return diag.NewAttributeErrorDiagnostic(p, summary, detail)
}

func parts(err error, fallbackSummary string) (string, string) {
	if e, ok := usererr.As(err); ok {
		detail := e.Detail
		if e.Err != nil {
			detail += "\n\nCause: " + e.Err.Error()
		}
		return e.Summary, detail
	}
	return fallbackSummary, err.Error()
}

// UnconfiguredProvider is the detail of the error a resource reports when the provider was
// not configured (its configuration had unknown values).
const UnconfiguredProvider = "The provider has no connection to the management cluster yet, usually because its configuration depends on values known only after apply. Apply those first (-target), or set the provider arguments from known values."
