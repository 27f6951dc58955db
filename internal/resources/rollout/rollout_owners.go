package rollout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// warnLeaving shows the clusters that left the rollout (relabelled, or removed from `names`)
// and what apply does to them under deletion_policy.
func warnLeaving(diags *diag.Diagnostics, plan *Model, leaving []string, obs *delivery.Observation) {
	if len(leaving) > 0 {
		diags.AddAttributeWarning(path.Root("leaving"), "Clusters Leaving The Rollout",
			fmt.Sprintf("%d cluster(s) that earlier applies changed are no longer picked (or, with delivery.flux, their Cluster was deleted): %s.\n\n%s",
				len(leaving), fleetresource.ShortList(leaving, 10), leavingEffect(plan.DeletionPolicy.ValueString())))
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
				"lists them in `leaving`.", len(later), fleetresource.ShortList(later, 10)))
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
