package apply

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PreviewCounts counts what applying a bundle would do to each of its objects.
type PreviewCounts struct {
	// Created objects do not exist yet; Unchecked of them could not be dry-run because the
	// bundle itself brings their CRD or Namespace (the server cannot judge them before those
	// exist), so they are counted created without the server's word.
	Created   int `json:"created"`
	Unchecked int `json:"unchecked,omitempty"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	// Conflicting objects hold fields another server-side applier owns (see ConflictError).
	Conflicting int `json:"conflicting"`
	// Rejected objects were refused by the API server: schema, validation or admission.
	Rejected int `json:"rejected"`
}

// Add adds o to c.
func (c *PreviewCounts) Add(o PreviewCounts) {
	c.Created += o.Created
	c.Unchecked += o.Unchecked
	c.Changed += o.Changed
	c.Unchanged += o.Unchanged
	c.Conflicting += o.Conflicting
	c.Rejected += o.Rejected
}

// Rejection is one object the API server refused in a dry-run, with the server's reason.
type Rejection struct {
	Object ObjectRef
	// Reason is the server's message (an admission policy's, a webhook's, schema validation's).
	Reason string
}

func (r Rejection) String() string { return fmt.Sprintf("%s: %s", r.Object, r.Reason) }

// PreviewResult is what a server-side dry-run of a bundle found on one cluster.
type PreviewResult struct {
	Counts    PreviewCounts
	Rejected  []Rejection
	Conflicts []*ConflictError
}

// Preview asks the cluster, by server-side dry-run apply of every object with the Applier's
// field manager, what applying objs would do: which objects it would create, change or leave
// unchanged, which hold fields another applier owns, and which it refuses (schema, validation,
// admission: ValidatingAdmissionPolicies and webhooks run on dry-runs too). Call Check first:
// Preview assumes every kind is known. A refusal is in the result, not an error; an error
// means the cluster could not be asked (unreachable, slow, throttled, ctx done). It makes no
// mutating calls.
func (a *Applier) Preview(ctx context.Context, objs []*unstructured.Unstructured) (*PreviewResult, error) {
	objs = copies(objs)
	// The dry-run must send what Apply would send: fields left to other controllers included.
	if err := a.keepIgnored(ctx, objs); err != nil {
		return nil, err
	}
	bundle := bundleDefines{kinds: definedKinds(objs), namespaces: bundleNamespaces(objs)}
	found := make([]previewOutcome, len(objs))
	// Objects in a namespace the bundle brings and the cluster lacks are created unchecked
	// without asking: the server could only answer that the namespace is not there.
	unchecked := a.inMissingNamespace(ctx, objs, bundle.namespaces)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for i, obj := range objs {
		if unchecked(obj) {
			found[i] = previewOutcome{action: ssa.CreatedAction, unchecked: true}
			continue
		}
		g.Go(func() error {
			var err error
			found[i], err = a.dryRun(gctx, obj, bundle)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return tally(found), nil
}

// bundleDefines is what a bundle brings that the cluster may lack until it is applied: the
// kinds its CRDs define and the Namespaces it holds.
type bundleDefines struct {
	// kinds is definedKinds: present for a kind the bundle defines (the value says whether it
	// is namespaced, which is not what counts here).
	kinds      map[schema.GroupVersionKind]bool
	namespaces map[string]bool
}

// bundleNamespaces returns the names of the Namespaces among objs.
func bundleNamespaces(objs []*unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	for _, obj := range objs {
		if gvk := obj.GroupVersionKind(); isNamespace(gvk.Group, gvk.Kind) {
			out[obj.GetName()] = true
		}
	}
	return out
}

// previewOutcome is what the dry-run found for one object: the action it would take, or the
// server's refusal, or a conflict with another applier.
type previewOutcome struct {
	action ssa.Action
	// unchecked: created without the server's word (see PreviewCounts.Unchecked).
	unchecked bool
	rejected  *Rejection
	conflict  *ConflictError
}

// dryRun asks the cluster what applying obj would do. A refusal or a conflict is an outcome; an
// error means the cluster could not be asked.
func (a *Applier) dryRun(ctx context.Context, obj *unstructured.Unstructured, bundle bundleDefines) (previewOutcome, error) {
	ref := RefOf(obj)
	entry, _, _, err := a.applier.Diff(ctx, obj, ssa.DiffOptions{})
	if err == nil {
		return previewOutcome{action: entry.Action}, nil
	}
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		return previewOutcome{conflict: conflict}, nil
	}
	var dryRun *ssaerrors.DryRunErr
	if errors.As(err, &dryRun) {
		err = dryRun.Unwrap()
	}
	// The server cannot judge an object whose kind or namespace the bundle itself brings:
	// it is created, unchecked.
	_, bundleKind := bundle.kinds[obj.GroupVersionKind()]
	if (apierrors.IsNotFound(err) || meta.IsNoMatchError(err)) && (bundleKind || bundle.namespaces[obj.GetNamespace()]) {
		return previewOutcome{action: ssa.CreatedAction, unchecked: true}, nil
	}
	if Rejected(err) {
		return previewOutcome{rejected: &Rejection{Object: ref, Reason: reasonOf(err)}}, nil
	}
	return previewOutcome{}, &ObjectError{Object: ref, Op: "dry-run apply", Err: err}
}

// tally counts the outcomes and lists the refusals and conflicts, sorted by object so that the
// result does not depend on the order the dry-runs answered in.
func tally(found []previewOutcome) *PreviewResult {
	res := &PreviewResult{}
	for _, o := range found {
		switch {
		case o.rejected != nil:
			res.Counts.Rejected++
			res.Rejected = append(res.Rejected, *o.rejected)
		case o.conflict != nil:
			res.Counts.Conflicting++
			res.Conflicts = append(res.Conflicts, o.conflict)
		case o.action == ssa.CreatedAction:
			res.Counts.Created++
			if o.unchecked {
				res.Counts.Unchecked++
			}
		case o.action == ssa.ConfiguredAction:
			res.Counts.Changed++
		default:
			res.Counts.Unchanged++
		}
	}
	slices.SortFunc(res.Rejected, func(x, y Rejection) int { return compareRefs(x.Object, y.Object) })
	slices.SortFunc(res.Conflicts, func(x, y *ConflictError) int { return compareRefs(x.Object, y.Object) })
	return res
}

// Rejected reports whether err is the API server refusing an object for what it is (schema,
// validation, an admission policy), as opposed to not answering: 400, 413 and 422. Such a
// refusal repeats on every try, so a dry-run that gets one predicts a failed apply. 403 is not
// one: it is also what RBAC answers when the plan's identity may read but not create (a plan-only
// role), which says nothing of the objects, and the two 403s are told apart only by their text.
// A cluster answering 403 is reported as not previewed, with the server's reason.
func Rejected(err error) bool {
	// Without a status (code 0) it is a transport error, not the server's verdict.
	switch statusCode(err) {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

func statusCode(err error) int32 {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code
	}
	return 0
}

// reasonOf is the server's message for err, without client-side wrapping.
func reasonOf(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
