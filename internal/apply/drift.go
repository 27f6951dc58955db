package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DriftState says how a live object differs from what was applied.
type DriftState string

const (
	// Missing: the object is not on the cluster.
	Missing DriftState = "missing"
	// Modified: applying the object again would change it.
	Modified DriftState = "modified"
)

// Drift is one object that differs from what was applied.
type Drift struct {
	Object ObjectRef  `json:"object"`
	State  DriftState `json:"state"`
	// Fields lists, for a modified object, the first few fields that differ, e.g. ".spec.replicas".
	Fields []string `json:"fields,omitempty"`
}

func (d Drift) String() string {
	if len(d.Fields) == 0 {
		return fmt.Sprintf("%s: %s", d.Object, d.State)
	}
	return fmt.Sprintf("%s: %s (%s)", d.Object, d.State, strings.Join(d.Fields, ", "))
}

// maxDriftFields bounds Drift.Fields: enough to say what changed, short enough for a plan.
const maxDriftFields = 8

// Drift compares objs with the cluster by server-side dry-run apply and returns those that
// are missing or would change, in inventory order. An edit to fields the objects do not set
// (a label someone added, a status) is not drift. It makes no mutating calls.
func (a *Applier) Drift(ctx context.Context, objs []*unstructured.Unstructured) ([]Drift, error) {
	found := make([]*Drift, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for i, obj := range objs {
		g.Go(func() error {
			ref := RefOf(obj)
			entry, live, merged, err := a.reader.Diff(gctx, obj.DeepCopy(), ssa.DiffOptions{})
			if err != nil {
				// The object's namespace or its CRD is gone: so is the object.
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					found[i] = &Drift{Object: ref, State: Missing}
					return nil
				}
				var dryRun *ssaerrors.DryRunErr
				if errors.As(err, &dryRun) {
					err = dryRun.Unwrap()
				}
				return &ObjectError{Object: ref, Op: "dry-run apply", Err: err}
			}
			switch entry.Action {
			case ssa.CreatedAction:
				found[i] = &Drift{Object: ref, State: Missing}
			case ssa.ConfiguredAction:
				if paths := a.ignore.pathsFor(obj); len(paths) > 0 {
					// ssa compared everything; only what is not ignored counts.
					live, merged = withoutIgnored(paths, live, merged)
					if equality.Semantic.DeepEqual(driftView(live), driftView(merged)) {
						return nil
					}
				}
				found[i] = &Drift{Object: ref, State: Modified, Fields: changedFields(live, merged)}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []Drift
	for _, d := range found {
		if d != nil {
			out = append(out, *d)
		}
	}
	slices.SortFunc(out, func(x, y Drift) int { return compareRefs(x.Object, y.Object) })
	return out, nil
}

// changedFields lists the paths at which live and merged (live with the manifest applied)
// differ, leaves first found in key order, at most maxDriftFields. Like ssa's drift check it
// looks at labels, annotations and everything outside metadata and status.
func changedFields(live, merged *unstructured.Unstructured) []string {
	if live == nil || merged == nil {
		return nil
	}
	var out []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		if len(out) >= maxDriftFields {
			return
		}
		xm, xok := x.(map[string]any)
		ym, yok := y.(map[string]any)
		if xok && yok {
			keys := slices.Sorted(maps.Keys(xm))
			for k := range ym {
				if _, ok := xm[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(path+fieldSegment(k), xm[k], ym[k])
			}
			return
		}
		xl, xok := x.([]any)
		yl, yok := y.([]any)
		if xok && yok && len(xl) == len(yl) {
			for i := range xl {
				walk(fmt.Sprintf("%s[%d]", path, i), xl[i], yl[i])
			}
			return
		}
		if !equality.Semantic.DeepEqual(x, y) {
			out = append(out, path)
		}
	}
	walk("", driftView(live), driftView(merged))
	return out
}

// driftView keeps what ssa's drift check compares: labels, annotations, and all but
// metadata and status.
func driftView(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			out[k] = v
		}
	}
	md := map[string]any{}
	if l := u.GetLabels(); len(l) > 0 {
		md["labels"] = toAny(l)
	}
	if an := u.GetAnnotations(); len(an) > 0 {
		md["annotations"] = toAny(an)
	}
	if len(md) > 0 {
		out["metadata"] = md
	}
	return out
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fieldSegment writes a map key as a path segment: .name, or ["app.kubernetes.io/name"]
// when the key would be ambiguous after a dot.
func fieldSegment(k string) string {
	if k == "" || strings.ContainsAny(k, `./[]"`) {
		return fmt.Sprintf("[%q]", k)
	}
	return "." + k
}
