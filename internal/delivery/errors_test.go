package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
)

func TestRevisionClass(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	readable := apply.ObjectStatus{Object: webRef, Status: "InProgress", Message: "Deployment does not have minimum availability"}
	unreadable := apply.ObjectStatus{Object: webRef, Status: "Unknown", Message: "connection refused", Unreadable: true}
	tests := []struct {
		name string
		err  error
		want error // nil: infrastructure
	}{
		{"400 bad request", apierrors.NewBadRequest("spec.replicas: must be an integer"), engine.ErrRevisionFailed},
		{"422 invalid", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web",
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")}), engine.ErrRevisionFailed},
		{"413 too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), engine.ErrRevisionFailed},
		{"403 admission webhook", errAdmission, engine.ErrRevisionFailed},
		{"403 ValidatingAdmissionPolicy", apierrors.NewForbidden(deployments, "web",
			errors.New(`ValidatingAdmissionPolicy 'replicas' with binding 'replicas' denied request: too many replicas`)), engine.ErrRevisionFailed},
		{"403 RBAC", errRBAC, nil},
		{"401 unauthorized", apierrors.NewUnauthorized("Unauthorized"), nil},
		{"404 not found", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "demo"), nil},
		{"409 conflict", apierrors.NewConflict(deployments, "web", errors.New("the object has been modified")), nil},
		{"409 already exists", apierrors.NewAlreadyExists(deployments, "web"), nil},
		{"429 too many requests", apierrors.NewTooManyRequests("slow down", 1), nil},
		{"500 internal", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), nil},
		{"503 unavailable", apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), nil},
		{"504 timeout", apierrors.NewTimeoutError("request did not complete within 30s", 0), nil},
		{"net error", refused, nil},
		{"url error", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api", Err: refused}, nil},
		{"deadline", context.DeadlineExceeded, nil},
		{"plain error", errors.New("something"), nil},
		{"not ready, readable", &apply.NotReadyError{Objects: []apply.ObjectStatus{readable}, Timeout: time.Minute}, engine.ErrRevisionFailed},
		{"not ready, failed early", &apply.NotReadyError{Objects: []apply.ObjectStatus{{Object: webRef, Status: "Failed"}}}, engine.ErrRevisionFailed},
		{"not ready, some readable", &apply.NotReadyError{Objects: []apply.ObjectStatus{unreadable, readable}}, engine.ErrRevisionFailed},
		{"not ready, all unreadable", &apply.NotReadyError{Objects: []apply.ObjectStatus{unreadable, unreadable}}, nil},
		{"check error", &apply.CheckError{MissingKinds: []apply.KindUse{{APIVersion: "example.com/v1", Kind: "Widget"}}}, engine.ErrRevisionFailed},
		{"field-manager conflict", errConflict, engine.ErrChangeRefused},
		{"http check answered", &httpCheckError{answered: true, err: errors.New("got status 503, want 200")}, engine.ErrRevisionFailed},
		{"http check not reached", &httpCheckError{err: errors.New("dial tcp: no such host")}, nil},
		{"wrapped webhook denial", fmt.Errorf("apply: %w", &apply.ObjectError{Object: webRef, Op: "apply", Err: errAdmission}), engine.ErrRevisionFailed},
		{"wrapped RBAC", &apply.ObjectError{Object: webRef, Op: "apply", Err: errRBAC}, nil},
		{"wrapped not ready", fmt.Errorf("verify: %w", &apply.NotReadyError{Objects: []apply.ObjectStatus{readable}}), engine.ErrRevisionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := revisionClass(tt.err); got != tt.want {
				t.Errorf("revisionClass(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// classifyWorld is a direct world whose management cluster answers goneReason with reason and
// err.
func classifyWorld(reason string, err error, calls *atomic.Int32) *world {
	svc := &Service{clock: engine.SystemClock{}, retryWait: time.Millisecond,
		goneReason: func(_ context.Context, namespace, name string, withoutSecrets bool) (string, error) {
			calls.Add(1)
			if namespace != "fleet" || name != "c1" {
				return "", fmt.Errorf("asked about %s/%s", namespace, name)
			}
			if withoutSecrets {
				return "", errors.New("direct mode asked without reading the kubeconfig Secret")
			}
			return reason, err
		}}
	return &world{svc: svc, spec: Spec{ClusterNamespace: "fleet"}, logf: func(string, map[string]any) {}}
}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	unavailable := apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	deleted := fmt.Errorf("cluster fleet/c1: kubeconfig Secret c1-kubeconfig not found: %w",
		apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "c1-kubeconfig"))
	tests := []struct {
		name       string
		err        error
		reason     string // what the management cluster says
		goneErr    error
		want       error // the class; nil: unmarked
		wantChecks int32
	}{
		{name: "nil", err: nil},
		{name: "revision failure: no question asked", err: errAdmission, reason: "Cluster fleet/c1 was deleted", want: engine.ErrRevisionFailed},
		{name: "refused change", err: errConflict, want: engine.ErrChangeRefused},
		{name: "already marked", err: engine.Mark(engine.ErrRevisionFailed, unavailable), reason: "gone", want: engine.ErrRevisionFailed},
		{name: "already gone", err: fmt.Errorf("x: %w", engine.ErrTargetGone), want: engine.ErrTargetGone},
		{name: "infrastructure, cluster still there", err: unavailable, want: nil, wantChecks: 1},
		{name: "infrastructure, cluster deleted", err: unavailable, reason: "Cluster fleet/c1 was deleted", want: engine.ErrTargetGone, wantChecks: 1},
		{name: "kubeconfig Secret deleted", err: deleted, reason: "kubeconfig Secret fleet/c1-kubeconfig was deleted", want: engine.ErrTargetGone, wantChecks: 1},
		{name: "management cluster unreadable: not gone", err: deleted, goneErr: apierrors.NewTooManyRequests("slow down", 1), want: nil, wantChecks: 1},
		{name: "unreadable objects", err: &apply.NotReadyError{Objects: []apply.ObjectStatus{{Object: webRef, Unreadable: true}}},
			reason: "Cluster fleet/c1 is being deleted", want: engine.ErrTargetGone, wantChecks: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			w := classifyWorld(tt.reason, tt.goneErr, &calls)
			got := w.classify(ctx, "c1", tt.err)
			if calls.Load() != tt.wantChecks {
				t.Errorf("asked the management cluster %d times, want %d", calls.Load(), tt.wantChecks)
			}
			if tt.err == nil {
				if got != nil {
					t.Fatalf("classify(nil) = %v", got)
				}
				return
			}
			if !errors.Is(got, tt.err) && got.Error() != tt.err.Error() {
				t.Errorf("classify lost the error: %v", got)
			}
			for _, class := range []error{engine.ErrRevisionFailed, engine.ErrChangeRefused, engine.ErrTargetGone} {
				if errors.Is(got, class) != (class == tt.want) {
					t.Errorf("classify(%v) = %v: is %v: %v, want class %v", tt.err, got, class, errors.Is(got, class), tt.want)
				}
			}
			if tt.want == engine.ErrTargetGone && tt.reason != "" && !strings.Contains(got.Error(), tt.reason) {
				t.Errorf("gone error %q does not say why (%s)", got, tt.reason)
			}
			var status apierrors.APIStatus
			if errors.As(tt.err, &status) && !errors.As(got, &status) {
				t.Errorf("classify hid the API status of %v", tt.err)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("unavailable")
	tests := []struct {
		name      string
		gone      string
		errs      []error // op's answers in turn; the last one repeats
		timeout   time.Duration
		wantCalls int
		want      error // nil: succeeds
		wantClass error
	}{
		{name: "infrastructure failures retried until they pass", errs: []error{apierrors.NewTooManyRequests("slow down", 1), unavailable, nil}, wantCalls: 3},
		{name: "revision failure not retried", errs: []error{errAdmission}, wantCalls: 1, want: errAdmission, wantClass: engine.ErrRevisionFailed},
		{name: "refused change not retried", errs: []error{errConflict}, wantCalls: 1, want: errConflict, wantClass: engine.ErrChangeRefused},
		{name: "vanished cluster not retried", gone: "Cluster fleet/c1 was deleted", errs: []error{unavailable}, wantCalls: 1, want: unavailable, wantClass: engine.ErrTargetGone},
		// 1+2+4+...+512 ms = 1.023 s: ten waits fit in 1.5 s, so eleven attempts.
		{name: "infrastructure failure until the deadline", errs: []error{unavailable}, timeout: 1500 * time.Millisecond, wantCalls: 11, want: unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var checks atomic.Int32
				w := classifyWorld(tt.gone, nil, &checks)
				ctx := context.Background()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				calls := 0
				err := w.retry(ctx, "c1", func(context.Context) error {
					e := tt.errs[min(calls, len(tt.errs)-1)]
					calls++
					return e
				})
				if calls != tt.wantCalls {
					t.Errorf("op called %d times, want %d", calls, tt.wantCalls)
				}
				switch {
				case tt.want == nil && err != nil:
					t.Fatalf("retry = %v, want success", err)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Fatalf("retry = %v, want %v", err, tt.want)
				}
				for _, class := range []error{engine.ErrRevisionFailed, engine.ErrChangeRefused, engine.ErrTargetGone} {
					if err != nil && errors.Is(err, class) != (class == tt.wantClass) {
						t.Errorf("retry = %v: is %v: %v", err, class, errors.Is(err, class))
					}
				}
			})
		})
	}
}
