package apply

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// testMapper maps ConfigMaps (namespaced) and Widgets (example.com/v1, cluster-scoped).
func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeRoot)
	return m
}

// TestExistingReadsClusterScopedObjectsWithANamespace: a cluster-scoped object that carries a
// namespace (a custom kind the provider took for namespaced, given a default namespace) is read
// even when that namespace is missing: it does not live there.
func TestExistingReadsClusterScopedObjectsWithANamespace(t *testing.T) {
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "web"},
	}}
	reads := 0
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
			}
			reads++
			return apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "widgets"}, key.Name)
		}}).Build()
	a := &Applier{client: cl, mapper: testMapper(), opts: Options{Concurrency: 4}}
	if _, err := a.Existing(context.Background(), []*unstructured.Unstructured{widget}); err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Errorf("the cluster-scoped Widget was read %d times, want 1", reads)
	}
}

// TestExistingAsksWhenTheNamespaceCannotBeRead: a namespace the cluster fails to answer for is
// not taken as missing; its objects are read one by one, and a read object is reported.
func TestExistingAsksWhenTheNamespaceCannotBeRead(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "web"},
	}}
	for _, tc := range []struct {
		name        string
		namespaceIs error
		wantReads   int
		wantFound   int
	}{
		{"namespace missing: no object read", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "web"), 0, 0},
		{"namespace unreadable: each object read", apierrors.NewInternalError(errors.New("etcd timeout")), 1, 1},
		{"namespace there: each object read", nil, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			reads := 0
			cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(cm.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if obj.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
						return tc.namespaceIs
					}
					mu.Lock()
					reads++
					mu.Unlock()
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			a := &Applier{client: cl, mapper: testMapper(), opts: Options{Concurrency: 4}}
			found, err := a.Existing(context.Background(), []*unstructured.Unstructured{cm})
			if err != nil {
				t.Fatal(err)
			}
			if reads != tc.wantReads || len(found) != tc.wantFound {
				t.Errorf("%d object reads, %d found; want %d, %d", reads, len(found), tc.wantReads, tc.wantFound)
			}
		})
	}
}
