// Package diagnostics turns errors into Terraform diagnostics with one wording: a Title-Case
// summary and a detail that says what happened and what to do.
package diagnostics

import (
	"errors"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
	summary, detail := fallbackSummary, err.Error()
	if e, ok := usererr.As(err); ok {
		summary, detail = e.Summary, e.Detail
		if e.Err != nil {
			detail += "\n\nCause: " + e.Err.Error()
		}
	}
	if hint := permissionHint(err); hint != "" {
		detail += "\n\n" + hint
	}
	return summary, detail
}

// permissionHint explains an RBAC refusal in err's chain, or returns "". The API server's
// message already names the user, the verb, the resource, its API group and namespace; what it
// cannot say is which credentials those were and where the roles are documented. Admission
// webhooks and policies answer 403 too, but their message says why (they never say "cannot
// <verb> resource"), and what they refuse is the objects, not the credentials.
func permissionHint(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsForbidden(err) {
		return ""
	}
	msg := status.Status().Message
	if !strings.Contains(msg, " cannot ") || !strings.Contains(msg, " resource ") {
		return ""
	}
	return "Missing Kubernetes permission: " + msg + ". " + PermissionDenied
}

// PermissionDenied says whose credentials lack an RBAC permission and where the roles are.
const PermissionDenied = "Where the error names a workload cluster, grant the permission to the identity in that " +
	"Cluster's `<name>-kubeconfig` Secret; otherwise to the identity the provider connects to the management " +
	"cluster with (its `config_path`, `kubeconfig_raw`, `host` and `token`, or `exec` settings, or the pod's ServiceAccount). The RBAC guide (docs/guides/rbac.md) " +
	"gives the ClusterRoles each use needs: plan only, rollouts and module assignments, in-place updates, Flux delivery."

// UnconfiguredProvider is the detail of the error a resource reports when the provider was
// not configured (its configuration had unknown values).
const UnconfiguredProvider = "The provider has no connection to the management cluster yet, usually because its configuration depends on values known only after apply. Apply those first (-target), or set the provider arguments from known values."
