package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestWaitReadsSoonThenOnlyWhatIsNotReady: a Deployment that becomes ready at its third read is
// waited for without a PollInterval's pause (an hour here: the wait would outlast the test's
// ten seconds), the ConfigMap ready from the start is not read again until the Deployment is
// ready, and then every object is read once more to confirm.
func TestWaitReadsSoonThenOnlyWhatIsNotReady(t *testing.T) {
	deploy := readyDeployment(nil)
	unstructured.RemoveNestedField(deploy.Object, "status")
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "default"},
	}}
	reads := map[string]int{}
	cl := readingClient(func(u *unstructured.Unstructured) {
		reads[u.GetKind()]++
		if u.GetKind() == "Deployment" && reads["Deployment"] >= 3 {
			u.Object["status"] = readyDeployment(nil).Object["status"]
		}
	}, deploy, cm)
	a := &Applier{client: cl, opts: Options{PollInterval: time.Hour}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Wait(ctx, []*unstructured.Unstructured{cm, deploy}, 0); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	if reads["Deployment"] != 4 || reads["ConfigMap"] != 2 {
		t.Errorf("reads = %v, want the Deployment 4 times (not ready, not ready, ready, confirmed) and the ConfigMap twice (first read, confirmation)", reads)
	}
}

// TestWaitConfirmsEveryObject: an object that was ready and is not any more when the last
// pending one becomes ready keeps the wait going; success needs all ready in one read.
func TestWaitConfirmsEveryObject(t *testing.T) {
	deploy := readyDeployment(nil)
	unstructured.RemoveNestedField(deploy.Object, "status")
	other := readyDeployment(nil)
	other.SetName("api")
	reads := map[string]int{}
	cl := readingClient(func(u *unstructured.Unstructured) {
		reads[u.GetName()]++
		switch {
		case u.GetName() == "web" && reads["web"] >= 2:
			u.Object["status"] = readyDeployment(nil).Object["status"]
		case u.GetName() == "api" && reads["api"] == 2: // rolling again at the confirmation
			unstructured.RemoveNestedField(u.Object, "status")
		}
	}, deploy, other)
	a := &Applier{client: cl, opts: Options{PollInterval: 50 * time.Millisecond}}
	if err := a.Wait(context.Background(), []*unstructured.Unstructured{deploy, other}, time.Minute); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	if reads["api"] != 4 {
		t.Errorf("api read %d times, want 4: ready, not ready at the first confirmation, ready, confirmed again", reads["api"])
	}
}

// TestWaitReadsObjectsAtOnce: a readiness check reads up to Concurrency objects at a time, so
// a bundle's read costs a few round trips, not one per object.
func TestWaitReadsObjectsAtOnce(t *testing.T) {
	var objs []*unstructured.Unstructured
	var held []client.Object
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "default"},
		}}
		objs = append(objs, cm)
		held = append(held, cm.DeepCopy())
	}
	var mu sync.Mutex
	inFlight, most := 0, 0
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(held...).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(30 * time.Millisecond) // a round trip, long enough for the others to start
			mu.Lock()
			inFlight--
			mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	a := &Applier{client: cl, opts: Options{PollInterval: time.Hour, Concurrency: 4}}
	if err := a.Wait(context.Background(), objs, time.Minute); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	if most != 4 {
		t.Errorf("at most %d reads at a time, want Concurrency's 4", most)
	}
}

// TestWaitListsAKindInANamespace: a readiness check reads the bundle's ConfigMaps of one
// namespace with one list (another namespace's two ConfigMaps and the Deployment one by one),
// judges a listed object that is missing as not found, and reads one by one when the list is
// refused (RBAC) or the namespace holds more than listPage of the kind.
func TestWaitListsAKindInANamespace(t *testing.T) {
	configMap := func(namespace, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": namespace},
		}}
	}
	deploy := readyDeployment(nil)
	objs := []*unstructured.Unstructured{configMap("web", "a"), configMap("web", "b"), configMap("web", "c"),
		configMap("web", "d"), configMap("other", "x"), configMap("other", "y"), deploy}
	mapper := testMapper().(*meta.DefaultRESTMapper)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)

	for _, tc := range []struct {
		name       string
		refuse     bool
		down       bool // the API server answers every request with 503
		crowd      int  // other ConfigMaps in web
		missing    bool // ConfigMap d not there
		lists      int
		gets       int
		notReady   int
		notFoundOf string
	}{
		{name: "listed", lists: 1, gets: 3},
		{name: "one missing", missing: true, lists: 1, gets: 3, notReady: 1, notFoundOf: "d"},
		{name: "list refused", refuse: true, lists: 1, gets: 7},
		{name: "crowded namespace", crowd: listPage, lists: 1, gets: 7},
		{name: "API server down", down: true, lists: 1, gets: 7, notReady: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held []client.Object
			for _, o := range objs {
				if !tc.missing || o.GetName() != "d" {
					held = append(held, o.DeepCopy())
				}
			}
			for i := range tc.crowd {
				held = append(held, configMap("web", fmt.Sprintf("crowd-%03d", i)))
			}
			var mu sync.Mutex
			lists, gets := 0, 0
			cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithRESTMapper(mapper).WithObjects(held...).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						mu.Lock()
						gets++
						mu.Unlock()
						if tc.down {
							return apierrors.NewServiceUnavailable("etcdserver: request timed out")
						}
						return c.Get(ctx, key, obj, opts...)
					},
					List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						mu.Lock()
						lists++
						mu.Unlock()
						if tc.down {
							return apierrors.NewServiceUnavailable("etcdserver: request timed out")
						}
						if tc.refuse {
							return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no list"))
						}
						if err := c.List(ctx, list, opts...); err != nil {
							return err
						}
						// The fake serves no pages: cut the list at its limit as an API server does.
						lo := (&client.ListOptions{}).ApplyOptions(opts)
						ul := list.(*unstructured.UnstructuredList)
						if lo.Limit > 0 && int64(len(ul.Items)) > lo.Limit {
							ul.Items = ul.Items[:lo.Limit]
							ul.SetContinue("more")
						}
						return nil
					},
				}).Build()
			a := &Applier{client: cl, mapper: mapper, opts: Options{Concurrency: 4}}
			got := a.notReady(context.Background(), objs, nil)
			if lists != tc.lists || gets != tc.gets {
				t.Errorf("%d lists and %d reads, want %d and %d", lists, gets, tc.lists, tc.gets)
			}
			if len(got) != tc.notReady {
				t.Fatalf("not ready: %v, want %d", got, tc.notReady)
			}
			if tc.notFoundOf != "" && (got[0].Object.Name != tc.notFoundOf || got[0].Status != "NotFound") {
				t.Errorf("not ready: %v, want %s not found", got, tc.notFoundOf)
			}
			for _, s := range got {
				if s.Unreadable != tc.down {
					t.Errorf("%s: unreadable %v, want %v (only when the server does not answer)", s.Object, s.Unreadable, tc.down)
				}
			}
		})
	}
}

// readingClient is a fake client holding objs whose every read of an object is passed, under
// one lock, to seen (which may change what the read returns).
func readingClient(seen func(u *unstructured.Unstructured), objs ...*unstructured.Unstructured) client.Client {
	var mu sync.Mutex
	var held []client.Object
	for _, o := range objs {
		held = append(held, o.DeepCopy())
	}
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(held...).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			seen(obj.(*unstructured.Unstructured))
			return nil
		}}).Build()
}

// TestWaitWakesOnAChange: a wait whose pauses have grown long reads again as soon as a watched
// object changes, not at its next pause; a watch the cluster refuses leaves the pauses as they
// were.
func TestWaitWakesOnAChange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		refuse    bool
		wantQuick bool
	}{
		{name: "watched", wantQuick: true},
		{name: "watch refused", refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deploy := readyDeployment(nil)
			unstructured.RemoveNestedField(deploy.Object, "status")
			var mu sync.Mutex
			reads := 0
			cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(deploy.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						mu.Lock()
						reads++
						mu.Unlock()
						return c.Get(ctx, key, obj, opts...)
					},
					Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
						if tc.refuse {
							return nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("RBAC: no watch"))
						}
						return c.Watch(ctx, list, opts...)
					},
				}).Build()
			a := &Applier{client: cl, unvetted: cl, opts: Options{PollInterval: time.Hour}}
			done := make(chan error, 1)
			go func() { done <- a.Wait(t.Context(), []*unstructured.Unstructured{deploy}, 0) }()
			// Six reads: the pauses after them have grown past a second.
			waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return reads >= 6 })
			ready := readyDeployment(nil)
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(deploy.GroupVersionKind())
			if err := cl.Get(t.Context(), client.ObjectKeyFromObject(deploy), live); err != nil {
				t.Fatal(err)
			}
			live.Object["status"] = ready.Object["status"]
			changedAt := time.Now()
			if err := cl.Status().Update(t.Context(), live); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Wait = %v", err)
				}
				if quick := time.Since(changedAt) < 500*time.Millisecond; quick != tc.wantQuick {
					t.Errorf("Wait returned %v after the change; want within half a second: %v", time.Since(changedAt).Round(time.Millisecond), tc.wantQuick)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Wait did not return within 10 s of the change")
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
