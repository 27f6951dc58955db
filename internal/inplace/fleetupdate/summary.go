package fleetupdate

import (
	"fmt"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// Summary keys.
const (
	SumClusters  = "clusters"
	SumSkipped   = "skipped"
	SumCurrent   = "current"
	SumChanging  = "changing"
	SumInPlace   = "in_place"
	SumRolling   = "rolling"
	SumUnchanged = "unchanged"
)

// Summarize counts a plan (the clusters by intent, the machines by strategy of the preview
// live) and names the clusters to look at, with why: skipped, resumed, machines Cluster API
// replaces or may replace. Its size grows with what needs a look, not with the fleet.
func Summarize(live *owners.FleetPlan, p engine.Plan) (map[string]int64, map[string]string) {
	sum := map[string]int64{SumClusters: int64(len(p.Order)), SumSkipped: 0, SumCurrent: 0, SumChanging: 0, SumInPlace: 0, SumRolling: 0, SumUnchanged: 0}
	att := map[string]string{}
	for _, name := range p.Order {
		in := p.Intents[name]
		switch in.Action {
		case engine.ActionSkip:
			sum[SumSkipped]++
			att[name] = "skipped: " + in.Reason
			continue
		case engine.ActionAlreadyCurrent:
			sum[SumCurrent]++
		default:
			sum[SumChanging]++
		}
		var notes []string
		if in.Provisioning != "" {
			notes = append(notes, "an earlier apply did not see it through; applied again")
		}
		if cp := live.Cluster(name); cp != nil {
			notes = append(notes, machineNotes(cp, sum)...)
		}
		if len(notes) > 0 {
			att[name] = strings.Join(notes, "; ")
		}
	}
	return sum, att
}

// machineNotes counts the cluster's machines by strategy into sum and says which Cluster API
// replaces or may replace.
func machineNotes(cp *owners.ClusterPlan, sum map[string]int64) []string {
	var notes []string
	for _, r := range cp.Owners {
		// Machines planned in place that Cluster API may replace all the same (the owner
		// surges): one note per owner, as the reason is the owner's.
		var mayBe []string
		var mayBeWhy string
		for _, m := range r.Plan.Machines {
			switch m.Strategy {
			case inplace.StrategyInPlace:
				sum[SumInPlace]++
				if m.MayBeReplaced != "" {
					mayBe, mayBeWhy = append(mayBe, m.Machine), m.MayBeReplaced
				}
			case inplace.StrategyRolling:
				sum[SumRolling]++
				why := FieldNames(m.Uncovered)
				if why == "" {
					why = strings.Join(m.Notes, "; ")
				}
				notes = append(notes, fmt.Sprintf("machine %s replaced by Cluster API (%s)", m.Machine, why))
			default:
				sum[SumUnchanged]++
			}
		}
		if len(mayBe) > 0 {
			what := "machine "
			if len(mayBe) > 1 {
				what = "machines "
			}
			notes = append(notes, fmt.Sprintf("%s%s may be replaced by Cluster API (%s)", what, strings.Join(mayBe, ", "), mayBeWhy))
		}
	}
	return notes
}

// FieldNames lists fields for a message: "machine spec.version, bootstrap spec.files".
func FieldNames(fields []inplace.Field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.String()
	}
	return strings.Join(names, ", ")
}
