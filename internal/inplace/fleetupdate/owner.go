package fleetupdate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
)

// The single-owner form (`cluster` with `machine_deployment` or `control_plane`, Spec.Owner):
// one owner of one cluster, planned and applied through the same Plan and Apply as the fleet
// form, so that the check that the plan is still what Terraform showed lives here and not in the
// resource. It has no waves and no records: the owner is planned and written as it is.

// OwnerPlanner previews the machines of one owner (owners.Planner). Tests give a fake.
type OwnerPlanner interface {
	Plan(ctx context.Context, req owners.Request) (*owners.PlanResult, error)
}

// OwnerUpdater carries out one owner's plan (ownerupdate.Updater). Tests give a fake.
type OwnerUpdater interface {
	Execute(ctx context.Context, res *owners.PlanResult, req ownerupdate.ExecuteRequest) (*ownerupdate.Execution, error)
}

// planOwner is Plan of the single-owner form: the owner's plan, with the summary a plan shows.
// Blocked machines are PlanResult.Blocked, not an error, as in the fleet form.
func (s *Service) planOwner(ctx context.Context, spec Spec) (*PlanResult, error) {
	res, err := s.OwnerPlanner.Plan(ctx, spec.ownerRequest())
	if err != nil {
		return nil, err
	}
	return &PlanResult{Revision: res.Revision, Owner: ownerPlanOf(res), Blocked: res.Plan.Err()}, nil
}

// OwnerPlan is one owner's plan and what a plan shows of it.
type OwnerPlan struct {
	*owners.PlanResult
	// Summary counts as the fleet form's do (Sum*): one cluster, its machines by strategy.
	Summary map[string]int64
	// Attention is why machines are replaced rather than updated in place, "" when none is.
	Attention string
	// Waves are the waves' sizes: one wave of the one cluster when anything changes, none
	// otherwise.
	Waves []int
}

// Shown is what a plan showed of one machine: how it is updated, and by which extensions.
type Shown struct {
	Strategy   inplace.Strategy
	Extensions []string
}

// StaleError: the plan made at apply differs from what Terraform showed, so nothing was written.
type StaleError struct {
	// Machines says, one line each, how each machine's plan changed.
	Machines []string
}

func (e *StaleError) Error() string {
	return "What the update extensions answer now differs from what the plan showed, so nothing was written (no template, no owner change); " +
		"it never turns into replacements silently. Plan again and review the new plan:\n  " + strings.Join(e.Machines, "\n  ")
}

// applyOwner is Apply of the single-owner form: it plans the owner again and carries the plan
// out, unless it went stale against req.Shown (a *StaleError, and nothing written). The result
// holds the plan it made and whatever Execute did, also on failure; it is nil only when the
// plan could not be made.
func (s *Service) applyOwner(ctx context.Context, req ApplyRequest) (*ApplyResult, error) {
	res, err := s.OwnerPlanner.Plan(ctx, req.Spec.ownerRequest())
	if err != nil {
		return nil, err
	}
	out := &ApplyResult{Revision: res.Revision, Owner: ownerPlanOf(res)}
	if stale := staleMachines(req.Shown, res.Plan); len(stale) > 0 {
		return out, &StaleError{Machines: stale}
	}
	out.Execution, err = s.OwnerUpdater.Execute(ctx, res, req.Exec)
	return out, err
}

// staleMachines compares what a plan showed with the plan made now: a machine shown in place
// that would now be replaced or blocked, or given to other extensions, makes the plan stale (an
// extension was removed, or answers differently). It never turns into a replacement silently.
// Machines not shown, or not shown in place, compare with nothing.
func staleMachines(shown map[string]Shown, now inplace.Plan) []string {
	var out []string
	for _, m := range now.Machines {
		w, ok := shown[m.Machine]
		if !ok || w.Strategy != inplace.StrategyInPlace {
			continue
		}
		if m.Strategy == inplace.StrategyRolling || m.Strategy == inplace.StrategyBlocked {
			why := strings.Join(m.Notes, "; ")
			if len(m.Uncovered) > 0 {
				why = "no extension covers " + fieldNames(m.Uncovered)
			}
			out = append(out, fmt.Sprintf("machine %s: planned in place by %s, now %s (%s)", m.Machine, strings.Join(w.Extensions, ", "), m.Strategy, why))
		} else if !slices.Equal(w.Extensions, m.Extensions) {
			out = append(out, fmt.Sprintf("machine %s: planned in place by %s, now by %s", m.Machine, strings.Join(w.Extensions, ", "), strings.Join(m.Extensions, ", ")))
		}
	}
	return out
}

// ownerPlanOf adds to res what a plan shows of it.
func ownerPlanOf(res *owners.PlanResult) *OwnerPlan {
	out := &OwnerPlan{PlanResult: res, Summary: map[string]int64{SumClusters: 1, SumSkipped: 0, SumCurrent: 0, SumChanging: 0, SumInPlace: 0, SumRolling: 0, SumUnchanged: 0}}
	var notes []string
	for _, mp := range res.Plan.Machines {
		switch mp.Strategy {
		case inplace.StrategyInPlace:
			out.Summary[SumInPlace]++
		case inplace.StrategyRolling:
			out.Summary[SumRolling]++
			why := fieldNames(mp.Uncovered)
			if why == "" {
				why = strings.Join(mp.Notes, "; ")
			}
			notes = append(notes, fmt.Sprintf("machine %s replaced by Cluster API (%s)", mp.Machine, why))
		default:
			out.Summary[SumUnchanged]++
		}
	}
	changes := false
	if res.Owner != nil {
		changes, _ = res.Owner.Changes()
		changes = changes || res.Owner.Current.GetAnnotations()[owners.AnnotationRevision] != res.Revision
	}
	if changes || out.Summary[SumInPlace]+out.Summary[SumRolling] > 0 {
		out.Summary[SumChanging] = 1
		out.Waves = []int{1}
	} else {
		out.Summary[SumCurrent] = 1
	}
	out.Attention = strings.Join(notes, "; ")
	return out
}

func fieldNames(fields []inplace.Field) string {
	s := make([]string, len(fields))
	for i, f := range fields {
		s[i] = f.String()
	}
	return strings.Join(s, ", ")
}
