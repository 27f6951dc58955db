package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldConflict is one field that another field manager owns.
type FieldConflict struct {
	// Manager is the other field manager, e.g. "flux" or "kubectl-edit".
	Manager string
	// Field is the field's path, e.g. ".spec.replicas".
	Field string
	// Applied tells a server-side applier (operation Apply) from a plain update.
	Applied bool
}

// ConflictError: applying the object would take fields from another server-side applier.
// Conflicts lists those fields. The apply stopped before applying any object of its stage.
type ConflictError struct {
	Object    ObjectRef
	Conflicts []FieldConflict
}

func (e *ConflictError) Error() string {
	byManager := map[string][]string{}
	var managers []string
	for _, c := range e.Conflicts {
		if _, seen := byManager[c.Manager]; !seen {
			managers = append(managers, c.Manager)
		}
		byManager[c.Manager] = append(byManager[c.Manager], c.Field)
	}
	slices.Sort(managers)
	parts := make([]string, len(managers))
	for i, m := range managers {
		parts[i] = fmt.Sprintf("%s owned by field manager %q", strings.Join(byManager[m], ", "), m)
	}
	return fmt.Sprintf("%s: server-side apply conflict: %s; another tool applies these fields: "+
		"stop managing them in one of the two, or force conflicts to take them over",
		e.Object, strings.Join(parts, "; "))
}

// vetConflicts intercepts the client's Patch calls. ssa forces ownership on every apply, its
// dry-runs included; without ForceConflicts, a dry-run apply is first sent unforced, and
// when the server reports conflicts:
//   - with plain updaters only (kubectl edit/scale/patch, client-side apply), the forced
//     dry-run follows: taking back fields we applied is how drift is repaired;
//   - with another server-side applier, the patch fails with a ConflictError, and ssa's
//     ApplyAll stops before applying anything, since it dry-runs every object first.
//
// The real apply stays forced: its dry-run has just shown that it takes nothing from another
// applier.
func (a *Applier) vetConflicts(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	po := (&client.PatchOptions{}).ApplyOptions(opts)
	forced := po.Force != nil && *po.Force
	if patch.Type() != types.ApplyPatchType || !slices.Contains(po.DryRun, metav1.DryRunAll) || !forced {
		return c.Patch(ctx, obj, patch, opts...)
	}
	unforced := slices.DeleteFunc(slices.Clone(opts), func(o client.PatchOption) bool { return o == client.ForceOwnership })
	err := c.Patch(ctx, obj, patch, unforced...)
	if !apierrors.IsConflict(err) {
		return err
	}
	conflicts := fieldConflicts(err)
	if len(conflicts) == 0 {
		return err // a conflict of another kind (e.g. a stale resourceVersion): ssa reports it
	}
	if applied := slices.DeleteFunc(conflicts, func(c FieldConflict) bool { return !c.Applied }); len(applied) > 0 {
		gvk := obj.GetObjectKind().GroupVersionKind()
		return &ConflictError{
			Object:    ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()},
			Conflicts: applied,
		}
	}
	return c.Patch(ctx, obj, patch, opts...)
}

// fieldConflicts reads the conflicts out of a server-side apply conflict error. The API server
// names each manager as `conflict with "NAME"`, followed by ` using APIVERSION` when NAME
// last wrote the field with an update rather than an apply (apimachinery's printManager). A
// cause it cannot read counts as an applier's: the safe side.
func fieldConflicts(err error) []FieldConflict {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []FieldConflict
	for _, cause := range status.Status().Details.Causes {
		if cause.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		c := FieldConflict{Field: cause.Field, Applied: true}
		rest, ok := strings.CutPrefix(cause.Message, "conflict with ")
		if name, err := strconv.QuotedPrefix(rest); ok && err == nil {
			c.Manager, _ = strconv.Unquote(name)
			c.Applied = !strings.Contains(rest[len(name):], " using ")
		} else {
			c.Manager = rest
		}
		out = append(out, c)
	}
	return out
}
