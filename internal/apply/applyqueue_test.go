package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// applyRecorder is a fake cluster that accepts every apply, records the real ones in the order
// they start, and counts how many are in flight at once.
type applyRecorder struct {
	mu        sync.Mutex
	started   []string
	inFlight  int
	most      map[string]int // by kind
	dryRuns   int
	failApply string // the name whose real apply fails
	failDry   string // the name whose dry-run fails
}

func (r *applyRecorder) client() client.WithWatch {
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			po := (&client.PatchOptions{}).ApplyOptions(opts)
			if len(po.DryRun) > 0 {
				r.mu.Lock()
				r.dryRuns++
				r.mu.Unlock()
				if obj.GetName() == r.failDry {
					return apierrors.NewInvalid(kindOf(obj), obj.GetName(), nil)
				}
				return nil
			}
			kind := kindOf(obj).Kind
			r.mu.Lock()
			r.started = append(r.started, kind+"/"+obj.GetName())
			r.inFlight++
			r.most[kind] = max(r.most[kind], r.inFlight)
			r.mu.Unlock()
			time.Sleep(20 * time.Millisecond) // a round trip, long enough for the others to start
			r.mu.Lock()
			r.inFlight--
			r.mu.Unlock()
			if obj.GetName() == r.failApply {
				return apierrors.NewInternalError(errors.New("etcd is gone"))
			}
			return nil
		},
	}).Build()
}

func queueBundle() []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for i := range 3 {
		objs = append(objs, deploymentObj("demo", fmt.Sprintf("web-%d", i), 1, nil, 0))
	}
	for i := range 6 {
		objs = append(objs, configMap("demo", fmt.Sprintf("cfg-%d", i), map[string]any{"k": "v"}))
	}
	return objs
}

// TestApplyQueue: a stage's applies are sent after every dry-run, in ssa's order between kinds
// (the ConfigMaps, then the Deployments that mount them), up to Concurrency of one kind at
// once; an apply that fails stops the kinds after it, and a dry-run that fails sends nothing.
func TestApplyQueue(t *testing.T) {
	stage := func(r *applyRecorder) (*Result, error) {
		c := r.client()
		a := &Applier{client: c, unvetted: c, opts: Options{FieldManager: "gradual", Concurrency: 4}}
		res := &Result{}
		return res, a.applyStage(context.Background(), queueBundle(), ssa.DefaultApplyOptions(), res)
	}

	t.Run("kinds in order, a kind at once", func(t *testing.T) {
		r := &applyRecorder{most: map[string]int{}}
		res, err := stage(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.started) != 9 || res.Count(Created) != 9 {
			t.Fatalf("%d applies sent, %d objects counted created; want 9 and 9", len(r.started), res.Count(Created))
		}
		for i, s := range r.started {
			if want := i < 6; strings.HasPrefix(s, "ConfigMap/") != want {
				t.Fatalf("applies started in the order %v; want every ConfigMap before any Deployment", r.started)
			}
		}
		if r.most["ConfigMap"] != 4 || r.most["Deployment"] != 3 {
			t.Errorf("at most %d ConfigMaps and %d Deployments applied at once, want 4 and 3", r.most["ConfigMap"], r.most["Deployment"])
		}
	})

	t.Run("an apply fails", func(t *testing.T) {
		r := &applyRecorder{most: map[string]int{}, failApply: "cfg-2"}
		_, err := stage(r)
		if err == nil || !strings.Contains(err.Error(), "ConfigMap/demo/cfg-2 apply failed") || !strings.Contains(err.Error(), "etcd is gone") {
			t.Fatalf("err = %v, want the failed ConfigMap named with the server's reason", err)
		}
		for _, s := range r.started {
			if strings.HasPrefix(s, "Deployment/") {
				t.Fatalf("applies %v: a Deployment was applied after a ConfigMap failed", r.started)
			}
		}
	})

	t.Run("a dry-run fails", func(t *testing.T) {
		r := &applyRecorder{most: map[string]int{}, failDry: "web-1"}
		_, err := stage(r)
		var oe *ObjectError
		if !errors.As(err, &oe) || oe.Object.Name != "web-1" {
			t.Fatalf("err = %v, want an ObjectError naming web-1", err)
		}
		if len(r.started) != 0 {
			t.Fatalf("applies %v were sent although a dry-run of the stage failed", r.started)
		}
	})
}
