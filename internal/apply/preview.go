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
	defined := definedKinds(objs)
	bundleNamespaces := map[string]bool{}
	for _, obj := range objs {
		if gvk := obj.GroupVersionKind(); isNamespace(gvk.Group, gvk.Kind) {
			bundleNamespaces[obj.GetName()] = true
		}
	}
	type outcome struct {
		action    ssa.Action
		unchecked bool
		rejected  *Rejection
		conflict  *ConflictError
	}
	found := make([]outcome, len(objs))
	// Objects in a namespace the bundle brings and the cluster lacks are created unchecked
	// without asking: the server could only answer that the namespace is not there.
	unchecked := a.inMissingNamespace(ctx, objs, bundleNamespaces)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for i, obj := range objs {
		if unchecked(obj) {
			found[i] = outcome{action: ssa.CreatedAction, unchecked: true}
			continue
		}
		g.Go(func() error {
			ref := RefOf(obj)
			entry, _, _, err := a.applier.Diff(gctx, obj, ssa.DiffOptions{})
			if err == nil {
				found[i].action = entry.Action
				return nil
			}
			var conflict *ConflictError
			if errors.As(err, &conflict) {
				found[i].conflict = conflict
				return nil
			}
			var dryRun *ssaerrors.DryRunErr
			if errors.As(err, &dryRun) {
				err = dryRun.Unwrap()
			}
			_, bundleKind := defined[obj.GroupVersionKind()]
			if (apierrors.IsNotFound(err) || meta.IsNoMatchError(err)) && (bundleKind || bundleNamespaces[obj.GetNamespace()]) {
				found[i] = outcome{action: ssa.CreatedAction, unchecked: true}
				return nil
			}
			if Rejected(err) {
				found[i].rejected = &Rejection{Object: ref, Reason: reasonOf(err)}
				return nil
			}
			return &ObjectError{Object: ref, Op: "dry-run apply", Err: err}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
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
	return res, nil
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
