package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

var webRef = apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}

// classifyWorld is a direct world whose management cluster answers goneReason with reason and
// err.
func classifyWorld(reason string, err error, calls *atomic.Int32) *world {
	svc := &Service{engine: directEngine{}, clock: engine.SystemClock{}, retryWait: time.Millisecond,
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
	w := &world{svc: svc, spec: Spec{ClusterNamespace: "fleet"}, logf: func(string, map[string]any) {}}
	w.engine = svc.engine.run(w)
	return w
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
