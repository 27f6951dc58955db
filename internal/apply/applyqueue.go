package apply

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// applyQueue holds a stage's applies until ssa has decided them all, then sends them several
// at a time. ssa's ApplyAll dry-runs a stage's objects concurrently but applies them one after
// another, each waiting for the one before: at 20 objects that was most of a small fleet's
// apply, and what made it slower than kubectl. The queue keeps what ApplyAll promises, the
// dry-runs of a whole stage before any apply, and its order between kinds (ssa sorts a stage
// so that, say, ConfigMaps go before the Deployments that mount them): objects of one kind in
// a row are applied together, up to a limit, and the next kind only after them.
//
// It relies on ssa applying with one call to Patch (a forced apply that is not a dry-run) per
// object and reading nothing back from it: TestCluster's applies on a real kube-apiserver fail
// if that changes.
type applyQueue struct {
	mu      sync.Mutex
	objects []client.Object
	patches []client.Patch
	opts    [][]client.PatchOption
}

// holds reports whether it keeps this Patch call for later (an apply that is not a dry-run).
func (q *applyQueue) holds(obj client.Object, patch client.Patch, opts []client.PatchOption) bool {
	po := (&client.PatchOptions{}).ApplyOptions(opts)
	if patch.Type() != types.ApplyPatchType || len(po.DryRun) > 0 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.objects = append(q.objects, obj)
	q.patches = append(q.patches, patch)
	q.opts = append(q.opts, opts)
	return true
}

// send sends the held applies with c, as ssa made them, in their order, running up to limit applies at once
// within each run of objects of one kind. It stops at the first run with a failure, and the
// error names the object the way ssa's does.
func (q *applyQueue) send(ctx context.Context, c client.Client, limit int) error {
	q.mu.Lock()
	objects, patches, opts := slices.Clone(q.objects), slices.Clone(q.patches), slices.Clone(q.opts)
	q.mu.Unlock()
	for start := 0; start < len(objects); {
		end := start + 1
		for end < len(objects) && kindOf(objects[end]) == kindOf(objects[start]) {
			end++
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(limit, 1))
		for i := start; i < end; i++ {
			g.Go(func() error {
				if err := c.Patch(gctx, objects[i], patches[i], opts[i]...); err != nil {
					return fmt.Errorf("%s apply failed: %w", describe(objects[i]), err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func kindOf(obj client.Object) schema.GroupKind {
	return obj.GetObjectKind().GroupVersionKind().GroupKind()
}

func describe(obj client.Object) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return utils.FmtUnstructured(u)
	}
	return fmt.Sprintf("%s/%s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
}

// stageManager is a resource manager for one stage's ApplyAll: like applyManager, it vets
// every dry-run for conflicts, and it hands the applies to q instead of sending them.
func (a *Applier) stageManager(q *applyQueue) *ssa.ResourceManager {
	c := interceptor.NewClient(a.unvetted, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if q.holds(obj, patch, opts) {
				return nil
			}
			return a.vetConflicts(ctx, c, obj, patch, opts...)
		},
	})
	m := ssa.NewResourceManager(c, a.poller, a.owner())
	m.SetConcurrency(a.opts.Concurrency)
	return m
}
