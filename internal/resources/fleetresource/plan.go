package fleetresource

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// PlanAndPrior is the start of ModifyPlan: it reads the plan and, unless the resource is being
// created, the prior state (nil then). ok is false when there is nothing to plan — a destroy —
// or the diagnostics hold an error.
func PlanAndPrior[M any](ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) (plan M, prior *M, ok bool) {
	if req.Plan.Raw.IsNull() {
		return plan, nil, false // destroy
	}
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return plan, nil, false
	}
	if !req.State.Raw.IsNull() {
		prior = new(M)
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
		if resp.Diagnostics.HasError() {
			return plan, nil, false
		}
	}
	return plan, prior, true
}

// SkippedDetail is the detail of the "Clusters Skipped" plan warning: intro, then each skipped
// cluster with its reason, sorted by name so that plans read the same from run to run. Past
// skippedListed clusters it groups them by reason instead (pauses and maintenance windows
// share one reason per annotation), with a count and the first names, so that the warning
// stays a few lines at any fleet size.
func SkippedDetail(intro string, skipped map[string]string) string {
	names := make([]string, 0, len(skipped))
	for name := range skipped {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(intro + "\n")
	if len(names) <= skippedListed {
		for _, name := range names {
			fmt.Fprintf(&b, "  - %s: %s\n", name, skipped[name])
		}
		return b.String()
	}
	byReason := map[string][]string{}
	var reasons []string
	for _, name := range names {
		r := skipped[name]
		if _, seen := byReason[r]; !seen {
			reasons = append(reasons, r)
		}
		byReason[r] = append(byReason[r], name)
	}
	// The largest groups first; ties by reason, for a stable plan.
	sort.SliceStable(reasons, func(i, j int) bool {
		if a, b := len(byReason[reasons[i]]), len(byReason[reasons[j]]); a != b {
			return a > b
		}
		return reasons[i] < reasons[j]
	})
	shown := reasons
	if len(shown) > skippedReasons {
		shown = shown[:skippedReasons]
	}
	for _, r := range shown {
		fmt.Fprintf(&b, "  - %d cluster(s) %s: %s\n", len(byReason[r]), ShortList(byReason[r], 5), r)
	}
	if rest := len(reasons) - len(shown); rest > 0 {
		n := 0
		for _, r := range reasons[len(shown):] {
			n += len(byReason[r])
		}
		fmt.Fprintf(&b, "  - %d more cluster(s) for %d other reason(s); the skipped attribute lists each\n", n, rest)
	}
	return b.String()
}

// skippedListed is how many skipped clusters a plan warning names one per line; skippedReasons
// is how many reasons it shows once it groups them.
const (
	skippedListed  = 20
	skippedReasons = 10
)

// ShortList joins names for a plan warning, at most shown of them, then "and N more": a
// warning stays readable at any fleet size.
func ShortList(names []string, shown int) string {
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// Deletion is what destroying a resource would remove, for the plan warning of a destroy or a
// replacement: a replacement destroys the resource and creates it again, which deletes its
// objects everywhere in between, and Terraform shows it only as "must be replaced".
type Deletion struct {
	What     string // "rollout fleet/ingress"
	Objects  int    // objects to delete, summed over the clusters
	Clusters int    // clusters that hold them
	Orphan   bool   // deletion_policy = "orphan"
	// Replacing names the attributes whose change forces a replacement ("" for a destroy).
	Replacing string
}

// WarnDeletion adds the plan warning for d. It states facts only: how many objects leave how
// many clusters, under which deletion_policy.
func WarnDeletion(diags *diag.Diagnostics, d Deletion) {
	var effect string
	if d.Orphan {
		effect = fmt.Sprintf("will leave its %d object(s) in %d cluster(s) and delete only its records (deletion_policy = \"orphan\")", d.Objects, d.Clusters)
	} else {
		effect = fmt.Sprintf("will delete %d object(s) from %d cluster(s), in waves of update_limit (deletion_policy = \"delete\")", d.Objects, d.Clusters)
	}
	if d.Replacing == "" {
		diags.AddWarning("Destroy Deletes From Clusters", fmt.Sprintf("Destroying %s %s.", d.What, effect))
		return
	}
	diags.AddWarning("Replacement Deletes From Clusters", fmt.Sprintf(
		"Changing %s replaces %s: destroying it %s; then the new one applies its objects again, as a first install.", d.Replacing, d.What, effect))
}

// RefusesAdoption says whether a plan refuses the objects someone else made rather than
// adopting them: only when `adopt` is known to be false. An adopt known only at apply (or null)
// refuses nothing at plan, so that the plan does not fail on what apply may be allowed to take
// over.
func RefusesAdoption(adopt types.Bool) bool {
	return !adopt.IsUnknown() && !adopt.IsNull() && !adopt.ValueBool()
}
