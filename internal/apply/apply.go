package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Action is what an apply did to one object.
type Action string

const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
)

// Change is what an apply did to one object.
type Change struct {
	Object ObjectRef `json:"object"`
	Action Action    `json:"action"`
}

func (c Change) String() string { return fmt.Sprintf("%s %s", c.Object, c.Action) }

// Result lists what an apply did, object by object, in the order it applied them.
type Result struct {
	Changes []Change `json:"changes"`
}

// Changed reports whether any object was created or configured.
func (r *Result) Changed() bool { return r.Count(Created)+r.Count(Configured) > 0 }

// Count is how many objects had action a.
func (r *Result) Count(a Action) int {
	n := 0
	for _, c := range r.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// definitionsTimeout bounds the wait for applied CRDs to be established (and Namespaces to be
// active) before the objects that use them are applied.
const definitionsTimeout = 2 * time.Minute

// Apply server-side applies objs: Check first (a bundle that cannot apply is refused before
// any change), then CRDs and Namespaces, waiting until the CRDs are established, then the
// rest. Objects that already match are left alone (Unchanged). Each stage dry-runs every one
// of its objects before applying any (then applies the objects of one kind several at once, see
// applyQueue), so an invalid object or a conflict (see
// Options.ForceConflicts) stops its stage before it changes anything. On error the Result
// lists the stages applied before it; the failed stage may still have applied some objects
// when an apply fails after its dry-runs passed (ssa then returns no change set), so callers
// must count the whole bundle as possibly applied. Errors name the object (*ObjectError,
// *ConflictError, *CheckError).
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured) (*Result, error) {
	res := &Result{}
	if err := a.Check(ctx, objs); err != nil {
		return res, err
	}
	objs = copies(objs)
	if err := a.keepIgnored(ctx, objs); err != nil {
		return res, err
	}
	definitions, resources := Stages(objs)
	opts := ssa.DefaultApplyOptions()
	opts.Force = a.opts.RecreateImmutable
	opts.WaitInterval = a.opts.PollInterval
	opts.Cleanup = a.migrateLegacy()

	if len(definitions) > 0 {
		if err := a.applyStage(ctx, definitions, opts, res); err != nil {
			return res, err
		}
		if err := a.wait(ctx, definitions, definitionsTimeout); err != nil {
			return res, fmt.Errorf("wait for CRDs and Namespaces: %w", err)
		}
	}
	if len(resources) > 0 {
		if err := a.applyStage(ctx, resources, opts, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (a *Applier) applyStage(ctx context.Context, objs []*unstructured.Unstructured, opts ssa.ApplyOptions, res *Result) error {
	queue := &applyQueue{}
	cs, err := a.stageManager(queue).ApplyAll(ctx, objs, opts)
	if err != nil {
		return applyError(err) // nothing held was sent
	}
	if err := queue.send(ctx, a.unvetted, a.opts.Concurrency); err != nil {
		return err
	}
	for _, e := range cs.Entries {
		res.Changes = append(res.Changes, Change{Object: refOfEntry(e), Action: Action(e.Action)})
	}
	return nil
}

func refOfEntry(e ssa.ChangeSetEntry) ObjectRef {
	return ObjectRef{
		Group: e.ObjMetadata.GroupKind.Group, Version: e.GroupVersion, Kind: e.ObjMetadata.GroupKind.Kind,
		Namespace: e.ObjMetadata.Namespace, Name: e.ObjMetadata.Name,
	}
}

// applyError turns ssa's errors into ones that name the object the way this package does.
func applyError(err error) error {
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		return conflict
	}
	var dryRun *ssaerrors.DryRunErr
	if errors.As(err, &dryRun) && dryRun.InvolvedObject() != nil {
		return &ObjectError{Object: RefOf(dryRun.InvolvedObject()), Op: "dry-run apply", Err: dryRun.Unwrap()}
	}
	return err // ssa's own wording names the object as Kind/namespace/name
}
