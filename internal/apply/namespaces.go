package apply

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespaced reports whether obj has a namespace and the cluster's REST mapping calls its kind
// namespaced. A kind the mapper cannot map is not taken for namespaced: a cluster-scoped custom
// kind may carry a default namespace.
func (a *Applier) namespaced(obj *unstructured.Unstructured) bool {
	if obj.GetNamespace() == "" || a.mapper == nil {
		return false
	}
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && mapping.Scope.Name() == meta.RESTScopeNameNamespace
}

// inMissingNamespace returns whether an object of objs is namespaced (by the cluster's REST
// mapping) and lives in a namespace the cluster does not have, reading each namespace once
// (among only's, when only is not nil). No object can exist in a missing namespace, and a
// dry-run of one is answered NotFound for the namespace before schema or admission look at it,
// so Existing and Preview need not ask about them one by one: on the first rollout of a bundle
// that brings its namespace, that is every object but one. A namespace that could not be read,
// and an object whose kind the cluster cannot map (a cluster-scoped custom kind may carry a
// default namespace), are asked about as before.
func (a *Applier) inMissingNamespace(ctx context.Context, objs []*unstructured.Unstructured, only map[string]bool) func(*unstructured.Unstructured) bool {
	var names []string
	seen := map[string]bool{}
	for _, obj := range objs {
		ns := obj.GetNamespace()
		if seen[ns] || (only != nil && !only[ns]) || !a.namespaced(obj) {
			continue
		}
		seen[ns] = true
		names = append(names, ns)
	}
	var mu sync.Mutex
	missing := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for _, ns := range names {
		g.Go(func() error {
			live := &metav1.PartialObjectMetadata{}
			live.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
			if err := a.client.Get(gctx, client.ObjectKey{Name: ns}, live); apierrors.IsNotFound(err) {
				mu.Lock()
				missing[ns] = true
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // every goroutine returns nil: a failed read leaves its namespace unreported
	return func(obj *unstructured.Unstructured) bool {
		return missing[obj.GetNamespace()] && a.namespaced(obj)
	}
}
