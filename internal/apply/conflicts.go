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

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
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
	var ours, others bool
	for i, m := range managers {
		parts[i] = fmt.Sprintf("%s owned by %s", strings.Join(byManager[m], ", "), records.DescribeFieldManager(m))
		if records.IsFieldManager(m) {
			ours = true
		} else {
			others = true
		}
	}
	var advice []string
	if ours {
		advice = append(advice, "another rollout or module assignment applies these fields, and an object has one owner: "+
			"leave it to one of the two (forcing conflicts does not take fields from another rollout)")
	}
	if others {
		advice = append(advice, "another tool applies these fields: stop managing them in one of the two, or force conflicts to take them over")
	}
	return fmt.Sprintf("%s: server-side apply conflict: %s; %s", e.Object, strings.Join(parts, "; "), strings.Join(advice, "; "))
}

// vetConflicts intercepts the client's Patch calls. ssa forces ownership on every apply, its
// dry-runs included; a dry-run apply is first sent unforced, and when the server reports
// conflicts:
//   - with plain updaters only (kubectl edit/scale/patch, client-side apply), or with the
//     legacy field manager (ours, see DefaultFieldManager), the forced dry-run follows: taking
//     back fields we applied is how drift is repaired;
//   - with another rollout or module assignment (another key's field manager), the patch
//     fails with a ConflictError, forced or not: an object has one owner;
//   - with another server-side applier, the patch fails with a ConflictError unless
//     ForceConflicts.
//
// ssa's ApplyAll stops before applying anything on such an error, since it dry-runs every
// object first. The real apply stays forced: its dry-run has just shown that it takes nothing
// it must not.
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
	refused := slices.DeleteFunc(conflicts, func(c FieldConflict) bool { return !a.refuses(c) })
	if len(refused) > 0 {
		gvk := obj.GetObjectKind().GroupVersionKind()
		return &ConflictError{
			Object:    ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()},
			Conflicts: refused,
		}
	}
	return c.Patch(ctx, obj, patch, opts...)
}

// refuses says whether the Applier must not take field conflict c over: another key's field
// manager's always, another server-side applier's unless ForceConflicts; never a plain
// updater's or our own (the legacy manager's).
func (a *Applier) refuses(c FieldConflict) bool {
	switch {
	case !c.Applied || a.ours(c.Manager):
		return false
	case records.IsFieldManager(c.Manager):
		return true
	}
	return !a.opts.ForceConflicts
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
