package blame

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

var (
	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
	webRef      = apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}
	refused     = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	admission   = apierrors.NewForbidden(deployments, "web",
		errors.New(`admission webhook "images.policy.example.com" denied the request: image registry.example.com/web:2 is not signed`))
	rbac = apierrors.NewForbidden(deployments, "web",
		errors.New(`User "system:serviceaccount:gradual:deployer" cannot patch resource "deployments" in API group "apps" in the namespace "demo"`))
	conflict = &apply.ConflictError{Object: webRef, Conflicts: []apply.FieldConflict{{Manager: "flux", Field: ".spec.replicas", Applied: true}}}
	readable = apply.ObjectStatus{Object: webRef, Status: "InProgress", Message: "Deployment does not have minimum availability"}
	deadline = apply.ObjectStatus{Object: webRef, Status: "Failed", Message: "Progress deadline exceeded"}
	unread   = apply.ObjectStatus{Object: webRef, Status: "Unknown", Message: "context deadline exceeded", Unreadable: true}
)

// TestOf is the classifier's table over errors recorded from the API server, the applier, the
// HTTP checks and the network: each row says which class and which rule decided, and why.
func TestOf(t *testing.T) {
	tests := []struct {
		name, why string
		err       error
		class     Class
		rule      string
	}{
		{"400 bad request", "the API server refused the objects' content", apierrors.NewBadRequest("spec.replicas: must be an integer"), Revision, "refused as invalid"},
		{"422 invalid", "schema validation", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web",
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")}), Revision, "refused as invalid"},
		{"413 too large", "an object too large to store", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), Revision, "refused as invalid"},
		{"403 admission webhook", "a policy denied the objects", admission, Revision, "denied by admission"},
		{"403 ValidatingAdmissionPolicy", "a policy denied the objects", apierrors.NewForbidden(deployments, "web",
			errors.New(`ValidatingAdmissionPolicy 'replicas' with binding 'replicas' denied request: too many replicas`)), Revision, "denied by admission"},
		{"403 RBAC", "the runner's credentials lack rights", rbac, Infrastructure, "forbidden to the runner"},
		{"403 namespace terminating", "the namespace is going away: wait", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "app",
			errors.New("unable to create new content in namespace demo because it is being terminated")), Infrastructure, "forbidden to the runner"},
		{"401 unauthorized", "credentials", apierrors.NewUnauthorized("Unauthorized"), Infrastructure, "refused, not for the objects' content"},
		{"404 not found", "a read raced a deletion", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "demo"), Infrastructure, "refused, not for the objects' content"},
		{"409 conflict", "optimistic concurrency", apierrors.NewConflict(deployments, "web", errors.New("the object has been modified")), Infrastructure, "refused, not for the objects' content"},
		{"429 too many requests", "throttled", apierrors.NewTooManyRequests("slow down", 1), Infrastructure, "throttled"},
		{"500 webhook unreachable", "the webhook's pod is restarting", apierrors.NewInternalError(errors.New(`failed calling webhook "images.policy.example.com": connection refused`)), Infrastructure, "server error"},
		{"503 unavailable", "overloaded", apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), Infrastructure, "server error"},
		{"504 timeout", "slow", apierrors.NewTimeoutError("request did not complete within 30s", 0), Infrastructure, "server error"},
		{"net error", "no answer", refused, Infrastructure, "no answer"},
		{"url error", "no answer", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api", Err: refused}, Infrastructure, "no answer"},
		{"deadline", "timed out", context.DeadlineExceeded, Infrastructure, "timed out"},
		{"plain error", "nothing tells: never the revision's", errors.New("something"), Unknown, "nothing tells"},
		{"not ready in time, all read", "every object read, some not ready", &apply.NotReadyError{Objects: []apply.ObjectStatus{readable}, Timeout: time.Minute}, Revision, "not ready in time"},
		{"object failed", "kstatus Failed: ProgressDeadlineExceeded", &apply.NotReadyError{Objects: []apply.ObjectStatus{deadline}}, Revision, "object failed"},
		{"object failed beside unreadable", "a failure read is a failure", &apply.NotReadyError{Objects: []apply.ObjectStatus{unread, deadline}}, Revision, "object failed"},
		{"brownout: some reads failed", "the progressing ones may only be slow", &apply.NotReadyError{Objects: []apply.ObjectStatus{unread, readable}, Timeout: time.Minute}, Infrastructure, "some reads failed"},
		{"no object readable", "the cluster failed, not the objects", &apply.NotReadyError{Objects: []apply.ObjectStatus{unread, unread}}, Infrastructure, "no object readable"},
		{"check error", "a kind the bundle needs is missing", &apply.CheckError{MissingKinds: []apply.KindUse{{APIVersion: "example.com/v1", Kind: "Widget"}}}, Revision, "needs what the cluster lacks"},
		{"field-manager conflict", "another manager's fields", conflict, Refused, "fields owned by another manager"},
		{"http check answered 500", "the app answered wrong", &HTTPAnswerError{Status: 500, Want: 200, Err: errors.New("got status 500, want 200")}, Revision, "check answered wrong"},
		{"http check answered 404", "the app answered wrong", &HTTPAnswerError{Status: 404, Want: 200, Err: errors.New("got status 404")}, Revision, "check answered wrong"},
		{"http check 502", "a gateway answered", &HTTPAnswerError{Status: 502, Want: 200, Err: errors.New("got status 502")}, Infrastructure, "gateway answered"},
		{"http check 503", "a gateway answered", &HTTPAnswerError{Status: 503, Want: 200, Err: errors.New("got status 503")}, Infrastructure, "gateway answered"},
		{"http check 504", "a gateway answered", &HTTPAnswerError{Status: 504, Want: 200, Err: errors.New("got status 504")}, Infrastructure, "gateway answered"},
		{"http check not reached", "the runner never reached it", &HTTPAnswerError{Err: errors.New("dial tcp: no such host")}, Infrastructure, "check not answered"},
		{"wrapped webhook denial", "wrapping keeps the evidence", fmt.Errorf("apply: %w", &apply.ObjectError{Object: webRef, Op: "apply", Err: admission}), Revision, "denied by admission"},
		{"wrapped RBAC", "wrapping keeps the evidence", &apply.ObjectError{Object: webRef, Op: "apply", Err: rbac}, Infrastructure, "forbidden to the runner"},
		{"marked where it arose", "a check Job that failed", engine.Mark(engine.ErrRevisionFailed, errors.New("check Job failed")), Revision, "marked where it arose"},
		{"in-place update not finished", "Cluster API, reachable, did not bring the machines up to date in time", fmt.Errorf("cluster c1: %w", ErrNotUpToDate), Revision, "change not finished in time"},
		{"gone", "the Cluster was deleted", fmt.Errorf("x: %w", engine.ErrTargetGone), Gone, "target gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Of(tt.err)
			if v.Class != tt.class || v.Rule != tt.rule {
				t.Errorf("Of(%v) = %v, want %s by %q (%s)", tt.err, v, tt.class, tt.rule, tt.why)
			}
			marked := Mark(tt.err)
			for class, sentinel := range map[Class]error{Revision: engine.ErrRevisionFailed, Refused: engine.ErrChangeRefused, Gone: engine.ErrTargetGone} {
				if errors.Is(marked, sentinel) != (class == tt.class) {
					t.Errorf("Mark(%v) is %v: %v, want class %s", tt.err, sentinel, errors.Is(marked, sentinel), tt.class)
				}
			}
			if !errors.Is(marked, tt.err) {
				t.Errorf("Mark lost the error: %v", marked)
			}
		})
	}
}

// TestFluxConditionVerdict: Flux's verdicts, from kustomize-controller's reason and the API
// server's status reason that fluxcd/pkg/ssa quotes in a failed dry run.
func TestFluxConditionVerdict(t *testing.T) {
	dryRun := func(reason, text string) string {
		return fmt.Sprintf("ConfigMap/demo/app dry-run failed (%s): %s", reason, text)
	}
	tests := []struct {
		name  string
		c     FluxCondition
		final bool
		class Class
		rule  string
	}{
		{"health check failed", FluxCondition{true, "False", "HealthCheckFailed", "timeout waiting for: [Deployment/demo/web status: 'Failed']"}, false, Revision, "health check failed in Flux"},
		{"build failed, Flux retries", FluxCondition{true, "False", "BuildFailed",
			"kustomize build failed: must build at directory: not a valid directory: evalsymlink failure on '/tmp/kustomization-3437271389' : lstat /tmp/kustomization-3437271389: no such file or directory"}, false, Unknown, "still at work"},
		{"build failed, wait over", FluxCondition{true, "False", "BuildFailed", "kustomize build failed: accumulating resources"}, true, Revision, "revision does not build"},
		{"dry run invalid", FluxCondition{true, "False", "ReconciliationFailed", dryRun("Invalid", `ConfigMap "app" is invalid: data: Invalid value`)}, false, Revision, "refused as invalid"},
		{"dry run denied by a webhook", FluxCondition{true, "False", "ReconciliationFailed", dryRun("Forbidden", `admission webhook "deny.example.com" denied the request: no`)}, false, Revision, "denied by admission"},
		{"dry run: webhook unreachable, Flux retries", FluxCondition{true, "False", "ReconciliationFailed",
			dryRun("InternalError", `Internal error occurred: failed calling webhook "deny.example.com": connect: connection refused`)}, false, Unknown, "still at work"},
		{"dry run: webhook unreachable, wait over", FluxCondition{true, "False", "ReconciliationFailed",
			dryRun("InternalError", `Internal error occurred: failed calling webhook "deny.example.com": connect: connection refused`)}, true, Infrastructure, "server error"},
		{"dry run throttled, wait over", FluxCondition{true, "False", "ReconciliationFailed", dryRun("TooManyRequests", "the server has received too many requests")}, true, Infrastructure, "throttled"},
		{"dry run timeout, wait over", FluxCondition{true, "False", "ReconciliationFailed", dryRun("Timeout", "the server was unable to return a response in the time allotted")}, true, Infrastructure, "server error"},
		{"dry run text that reads like a denial but is a 503", FluxCondition{true, "False", "ReconciliationFailed", dryRun("ServiceUnavailable", "the request is invalid right now")}, true, Infrastructure, "server error"},
		{"namespace terminating", FluxCondition{true, "False", "ReconciliationFailed", dryRun("Forbidden", "unable to create new content in namespace demo because it is being terminated")}, true, Infrastructure, "forbidden to the runner"},
		{"workload unreachable, Flux retries", FluxCondition{true, "False", "ReconciliationFailed", "failed to get kubeconfig: connection refused"}, false, Unknown, "still at work"},
		{"workload unreachable, wait over", FluxCondition{true, "False", "ReconciliationFailed", "failed to get kubeconfig: connection refused"}, true, Infrastructure, "reconciliation failed, not on the objects"},
		{"progressing", FluxCondition{true, "Unknown", "Progressing", "Reconciliation in progress"}, false, Unknown, "still at work"},
		{"attempted, no verdict in time", FluxCondition{true, "Unknown", "Progressing", "Reconciliation in progress"}, true, Infrastructure, "controller gave no verdict"},
		{"attempted, not ready when the wait ended", FluxCondition{true, "False", "Progressing", "Deployment not ready"}, true, Revision, "not ready in time"},
		{"never attempted", FluxCondition{false, "True", "ReconciliationSucceeded", "Applied revision r0"}, true, Infrastructure, "revision never attempted"},
		{"source not ready", FluxCondition{false, "False", "ArtifactFailed", "OCIRepository 'fleet/app' is not ready"}, true, Infrastructure, "revision never attempted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := FluxConditionVerdict(tt.c, tt.final)
			if v.Class != tt.class || v.Rule != tt.rule {
				t.Errorf("FluxConditionVerdict(%+v, final %v) = %v, want %s by %q", tt.c, tt.final, v, tt.class, tt.rule)
			}
		})
	}
}
