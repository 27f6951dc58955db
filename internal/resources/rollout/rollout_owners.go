package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// checkOwners is the plan-time check that every object has one owner, on the clusters the plan
// changes: an object another rollout or module assignment (same record namespace) holds is
// refused, naming both; an object someone else made outside the provider is adopted, said in a
// warning, or refused with adopt = false. Claims that ignore says are no one else's (the rollout
// this one replaces) do not count. It reads only. It reports whether the plan may go on.
func (r *rolloutResource) checkOwners(ctx context.Context, plan *Model, spec delivery.Spec, changing []string, ignore func(records.Key) bool, diags *diag.Diagnostics) bool {
	if len(changing) == 0 {
		return true
	}
	claims, err := r.Data.Delivery.Claims(ctx, spec, changing, ignore)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return false
	}
	if len(claims) > 0 {
		diags.Append(diagnostics.AttributeFromError(pathManifests, delivery.ClaimsError(claims, spec.Key.Describe(), assignment.Describe), "Object Claimed By Two Owners"))
		return false
	}
	found, err := r.Data.Delivery.Adoptions(ctx, spec, changing)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return false
	}
	if len(found) == 0 {
		return true
	}
	if !plan.Adopt.IsUnknown() && !plan.Adopt.IsNull() && !plan.Adopt.ValueBool() {
		diags.Append(diagnostics.AttributeFromError(path.Root("adopt"), delivery.AdoptRefused(found, spec.Key.Describe()), "Objects Exist Already"))
		return false
	}
	diags.AddAttributeWarning(pathManifests, "Objects Will Be Adopted",
		"These objects of the manifests exist already, made by someone else; apply takes them over and records them as adopted, "+
			"so the rollout never deletes them (a failed first revision puts them back as they are now; prune and destroy give them back):\n  "+
			delivery.DescribeFound(found, 20))
	return true
}

// warnLeaving shows the clusters that left the rollout (relabelled, or removed from `clusters`)
// and what apply does to them under deletion_policy.
func warnLeaving(diags *diag.Diagnostics, plan *Model, leaving []string, obs *delivery.Observation) {
	if len(leaving) > 0 {
		diags.AddAttributeWarning(path.Root("leaving"), "Clusters Leaving The Rollout",
			fmt.Sprintf("%d cluster(s) that earlier applies changed are no longer picked: %s.\n\n%s",
				len(leaving), shared.ShortList(leaving, 10), leavingEffect(plan.DeletionPolicy.ValueString())))
	}
	var later []string
	for _, name := range obs.Leaving {
		if !slices.Contains(leaving, name) {
			later = append(later, name)
		}
	}
	if len(later) > 0 {
		diags.AddAttributeWarning(path.Root("leaving"), "Clusters Leaving After This Apply",
			fmt.Sprintf("%d cluster(s) that earlier applies changed are no longer picked as the fleet reads now: %s. This apply leaves them "+
				"alone (they were not picked as the refresh read the fleet, or this plan changes which clusters are picked); the next plan "+
				"lists them in `leaving`.", len(later), shared.ShortList(later, 10)))
	}
}

func leavingEffect(policy string) string {
	if policy == "orphan" {
		return "With deletion_policy = \"orphan\", apply keeps their objects and removes the rollout's records there."
	}
	return "With deletion_policy = \"delete\", apply deletes the objects the rollout made there (adopted ones are given back, not deleted) and removes its records."
}

// leftDetail says what apply did to the clusters that left.
func leftDetail(left []string, policy string) string {
	what := "objects the rollout made deleted, records removed"
	if policy == "orphan" {
		what = "objects kept (deletion_policy = \"orphan\"), records removed"
	}
	return fmt.Sprintf("%s: %s.", strings.Join(left, ", "), what)
}
