package assignment

import (
	"context"
	"fmt"
	"slices"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// PlanRequest is one plan of an assignment.
type PlanRequest struct {
	Spec  Spec
	Query fleet.Query
	// Prior, when not nil, is the per-cluster status the refresh before this plan recorded (the
	// resource's prior state), given when the configuration picks the same clusters: the plan
	// is made from it, so that Terraform's plan at apply comes out the same (see
	// delivery.Prior). PriorSkipped are the clusters it could not change, with the reason.
	Prior        []ClusterStatus
	PriorSkipped map[string]string
	// Drifted marks cluster → module pairs the last refresh found drifted (see Drifted).
	Drifted map[string]map[string]bool
	// RefuseAdoption refuses objects someone else made (adopt = false) instead of adopting them.
	RefuseAdoption bool
}

// ModuleVerdict is the ledger's verdict on one module's revision: Err is its refusal
// (delivery.InvalidRefusal); Kept says clusters run it already, so it stays where it runs and
// goes nowhere else, instead of failing every later plan.
type ModuleVerdict struct {
	Index int
	Err   error
	Kept  bool
}

// PlanResult is what a plan of an assignment found and decided, as values: the resource only
// formats them.
type PlanResult struct {
	Observation *Observation
	// FromState says the plan was made from PlanRequest.Prior: its waves and Leaving are
	// what apply carries out. Otherwise apply reads the fleet again.
	FromState bool
	Plan      BindingPlan
	// Waves are, per module, the waves apply carries out.
	Waves map[string][][]string
	// Leaving are the clusters apply lets go of (from Prior only); LeavingLater, the ones the
	// fleet says are leaving now that this apply leaves alone (the next plan lists them).
	Leaving, LeavingLater []string
	// Invalid holds the ledger's verdicts on modules with clusters to change.
	Invalid []ModuleVerdict
	// Refused is set when apply would refuse: a canary that cannot go first, objects another
	// owner manages, manifests a cluster cannot take, or objects that exist already with
	// adopt = false.
	Refused *delivery.Refusal
	// Adoptions are the objects someone else made that apply takes over.
	Adoptions []delivery.Found
	// Previews are what the dry-run of each module found (Spec.Preview), in module order,
	// each labelled with its module; empty when it dry-ran nothing.
	Previews []*delivery.Preview
}

// Refusing reports whether apply would refuse the plan.
func (p *PlanResult) Refusing() bool {
	return p.Refused != nil || slices.ContainsFunc(p.Invalid, func(v ModuleVerdict) bool { return !v.Kept })
}

// Plan reads the fleet and decides what an apply of req.Spec would do: per module, the
// clusters that get its revision and in which waves, the clusters let go of, and whether it is
// refused. Errors are failures to read; refusals are in the result.
func Plan(ctx context.Context, svc *delivery.Service, req PlanRequest) (*PlanResult, error) {
	spec := req.Spec
	obs, err := Observe(ctx, svc, req.Query, spec, false)
	if err != nil {
		return nil, err
	}
	// A window annotation that cannot be read is bad input: the plan fails naming the cluster
	// (every module read the same Clusters, so the first one says it).
	for _, m := range spec.Modules {
		if o := obs.Modules[m.Name]; o != nil && o.Discovery != nil {
			if err := o.Discovery.WindowProblems(); err != nil {
				return nil, err
			}
			break
		}
	}
	// Each cluster's variables come from its Cluster as it reads now; one that misses a
	// variable refuses the plan, before anything is asked of the clusters.
	if err := spec.Render(obs.Clusters); err != nil {
		return &PlanResult{Observation: obs, Refused: delivery.Refuse("values", err)}, nil
	}
	if req.Prior == nil {
		// Planned from the fleet as it reads now: each module's records-missing clusters are
		// found as its run will find them, so that the plan holds them back too (PlanAssignment).
		// From the state, the refresh found them already (ObservationFrom keeps the state).
		markUnrecorded(ctx, svc, spec, obs)
	}
	p := decide(obs, req)
	if p.Refusing() {
		return p, nil
	}
	// The clusters to check are the planned ones the fleet still offers: one that became
	// unreachable since the refresh is left out by apply, with a warning, not refused here.
	checked := onlyEligible(p.Plan.Apply, obs.Eligible)
	// The manifests first, as the rollout's plan does: a bundle a cluster cannot take is named
	// as such, before the objects it names are looked up on the clusters for their owners.
	// The dry-run preview goes with that check: one pass, one connection per cluster.
	p.Previews, err = CheckManifests(ctx, svc, spec, checked, p.Waves)
	if p.Refused = delivery.Refuse("modules", err); p.Refused != nil {
		return p, nil
	}
	if p.Refused = delivery.Refuse("modules", delivery.PreviewsRefusal(p.Previews...)); p.Refused != nil {
		return p, nil
	}
	if p.Refused = delivery.Refuse("modules", CheckClaims(ctx, svc, spec, checked)); p.Refused != nil {
		return p, nil
	}
	if p.Adoptions, err = Adoptions(ctx, svc, spec, checked); err != nil {
		return nil, err
	}
	if len(p.Adoptions) > 0 && req.RefuseAdoption {
		p.Refused = &delivery.Refusal{Attribute: "adopt", Err: delivery.AdoptRefused(p.Adoptions, spec.Key.Describe())}
	}
	return p, nil
}

// decide is the part of Plan that reads nothing: from what the fleet says (obs) and
// the request, the plan, the clusters let go of and the ledger's verdicts.
func decide(obs *Observation, req PlanRequest) *PlanResult {
	spec := req.Spec
	p := &PlanResult{Observation: obs, FromState: req.Prior != nil}
	planned := obs // what the plan is made from
	if p.FromState {
		planned = ObservationFrom(req.Prior, req.PriorSkipped, spec)
		withPrevious(planned, obs)
		p.Plan = PlanAssignment(planned, spec, req.Drifted)
		// The clusters let go of are the ones the refresh found leaving (ObservationFrom), so
		// that the final plan at apply comes out the same; bindings of deleted Clusters are
		// dropped by apply as it finds them (nothing is left there to change), not planned.
		p.Plan.Gone = nil
		p.Leaving = p.Plan.Leaving
	} else {
		p.Plan = PlanAssignment(obs, spec, req.Drifted)
	}
	p.LeavingLater = slices.DeleteFunc(slices.Clone(obs.Leaving), func(n string) bool { return slices.Contains(p.Leaving, n) })
	for i, m := range spec.Modules {
		if len(p.Plan.Apply[m.Name]) == 0 {
			continue
		}
		// retry_invalid applies it anyway, as a rollout's does; the ledger entry goes once it succeeds.
		if entry, ok := obs.Modules[m.Name].Invalid(m.Revision); ok && !spec.Retry {
			v := ModuleVerdict{Index: i, Err: delivery.InvalidRefusal(fmt.Sprintf("module %s (version %s) of %s", m.Name, m.Version, spec.Key.Describe()),
				m.Revision, spec.RecordNamespace, entry, true)}
			if delivery.RunsRevision(obs.Modules[m.Name].Targets, m.Revision) {
				v.Kept = true
				delete(p.Plan.Apply, m.Name)
			}
			p.Invalid = append(p.Invalid, v)
		}
	}
	p.Waves = Waves(p.Plan, spec)
	if err := movesOldRefusal(p.Plan, spec); err != nil {
		p.Refused = &delivery.Refusal{Attribute: "delivery", Err: err}
		return p
	}
	if err := CanaryRefusal(CanaryGaps(planned, p.Plan, spec), "Canary Not In The First Wave",
		"Without them a module's first wave would go straight to the rest of the fleet. Wait until they are ready, remove them "+
			"from canary, or set canary_optional = true to let the modules go ahead without them."); err != nil {
		p.Refused = &delivery.Refusal{Attribute: "canary", Err: err}
	}
	return p
}

// markUnrecorded marks, per module, the eligible clusters whose records of it are gone while its
// objects are there (delivery.Service.MarkUnrecorded). A cluster that could not be read for it
// is skipped, as observe skips one any module could not read: apply's run would skip it too.
func markUnrecorded(ctx context.Context, svc *delivery.Service, spec Spec, obs *Observation) {
	for _, m := range spec.Modules {
		o := obs.Modules[m.Name]
		if o == nil {
			continue
		}
		svc.MarkUnrecorded(ctx, spec.moduleSpec(m), o)
		for name, reason := range o.Skipped {
			if _, skipped := obs.Skipped[name]; !skipped {
				obs.Skipped[name] = reason
			}
		}
	}
	obs.Eligible = slices.DeleteFunc(obs.Eligible, func(name string) bool { _, skipped := obs.Skipped[name]; return skipped })
}

// onlyEligible returns apply without the clusters not in eligible.
func onlyEligible(apply map[string][]string, eligible []string) map[string][]string {
	ok := make(map[string]bool, len(eligible))
	for _, c := range eligible {
		ok[c] = true
	}
	out := map[string][]string{}
	for m, clusters := range apply {
		for _, c := range clusters {
			if ok[c] {
				out[m] = append(out[m], c)
			}
		}
	}
	return out
}

// PlannedBinding is a binding as the plan expects it after apply. Changes marks the ones the
// apply (re)writes; their applied_at is only known then.
type PlannedBinding struct {
	records.ModuleBinding
	Changes bool
}

// BindingPlan is what an apply of the assignment will do.
type BindingPlan struct {
	// Bindings by cluster, as they will be after a successful apply.
	Bindings map[string][]PlannedBinding
	// Apply lists, per module, the clusters that get its revision, sorted.
	Apply map[string][]string
	// KeptOld lists, per module (ApplyOnce), the bound clusters that keep an older revision.
	KeptOld map[string][]string
	// MovesOld lists, per module (ApplyOnce), the clusters moving between engines that keep an
	// older revision than the configured one: a move cannot pin them to the same content
	// (movesOldRefusal).
	MovesOld map[string][]string
	// Held lists, per module, the clusters it is held back on because its records are gone
	// there while its objects are not (delivery.StateRecordsMissing), with the reason: the
	// module's run skips them (delivery.HoldUnrecorded), so the plan leaves them out of Apply
	// and its waves rather than promise a change apply will not make.
	Held map[string]map[string]string
	// Removed lists modules no longer configured, with the clusters bound to them.
	Removed map[string][]string
	// Leaving and Gone as observed: their bindings are dropped.
	Leaving, Gone []string
}

// Changes reports whether apply has anything to do.
func (p BindingPlan) Changes() bool {
	return len(p.Apply) > 0 || len(p.Removed) > 0 || len(p.Leaving) > 0 || len(p.Gone) > 0
}

// PlanAssignment decides, per eligible cluster and module, whether the module is applied.
// drifted marks cluster → module pairs the last refresh found drifted (Reconcile repairs them).
func PlanAssignment(obs *Observation, spec Spec, drifted map[string]map[string]bool) BindingPlan {
	p := BindingPlan{Bindings: map[string][]PlannedBinding{}, Apply: map[string][]string{}, KeptOld: map[string][]string{},
		MovesOld: map[string][]string{}, Held: map[string]map[string]string{}, Removed: map[string][]string{}, Leaving: obs.Leaving, Gone: obs.Gone}
	for _, cluster := range obs.Eligible {
		var planned []PlannedBinding
		for _, m := range spec.Modules {
			b, bound := obs.Binding(cluster, m.Name)
			st := obs.moduleState(m.Name, cluster)
			keep := false
			switch spec.Mode {
			case ApplyOnce:
				keep = bound && b.Result == records.BindingApplied
				if keep && obs.heldByPrevious(m.Name, cluster) {
					// Moving between engines: the new engine takes it over (move.go).
					keep = false
					if b.Revision != m.Revision && b.Revision != m.MovedFromRevision {
						p.MovesOld[m.Name] = append(p.MovesOld[m.Name], cluster)
					}
				}
				if keep && b.Revision != m.Revision {
					p.KeptOld[m.Name] = append(p.KeptOld[m.Name], cluster)
				}
			default:
				keep = bound && b.Result == records.BindingApplied && b.Revision == m.Revision &&
					st.State == delivery.StateCurrent && st.Revision == m.Revision && !drifted[cluster][m.Name]
			}
			if reason, held := holdsBack(st, spec); !keep && held {
				// As the module's run will: skipped there, its binding (if any) kept as it is.
				if p.Held[m.Name] == nil {
					p.Held[m.Name] = map[string]string{}
				}
				p.Held[m.Name][cluster] = reason
				keep = bound
			}
			if keep {
				planned = append(planned, PlannedBinding{ModuleBinding: b})
				continue
			}
			if _, held := p.Held[m.Name][cluster]; held {
				continue // not bound: nothing to keep, nothing planned
			}
			p.Apply[m.Name] = append(p.Apply[m.Name], cluster)
			planned = append(planned, PlannedBinding{
				ModuleBinding: records.ModuleBinding{Module: m.Name, Revision: m.Revision, Result: records.BindingApplied},
				Changes:       true,
			})
		}
		p.Bindings[cluster] = sortPlanned(planned)
	}
	for cluster, reason := range obs.Skipped {
		_ = reason
		var kept []PlannedBinding
		for _, b := range obs.Bindings[cluster] {
			if _, ok := spec.Module(b.Module); ok {
				kept = append(kept, PlannedBinding{ModuleBinding: b})
			}
		}
		if len(kept) > 0 {
			p.Bindings[cluster] = sortPlanned(kept)
		}
	}
	for cluster, bs := range obs.Bindings {
		for _, b := range bs {
			if _, ok := spec.Module(b.Module); !ok {
				p.Removed[b.Module] = append(p.Removed[b.Module], cluster)
			}
		}
	}
	for _, cs := range p.Removed {
		slices.Sort(cs)
	}
	return p
}

// holdsBack reports whether a module whose state on a cluster is st is held back there, and
// why: its records are gone while its objects are not, and adopt = true is not written
// (Spec.AdoptUnrecorded). It is delivery.HoldUnrecorded's judgement, which the module's run
// makes at apply, so that plan and apply leave out the same clusters in the same words.
func holdsBack(st delivery.ClusterState, spec Spec) (string, bool) {
	t := delivery.HoldUnrecorded([]engine.Target{{Name: "c"}}, map[string]delivery.ClusterState{"c": st}, spec.AdoptUnrecorded)[0]
	return t.SkipReason, t.SkipReason != ""
}

func sortPlanned(bs []PlannedBinding) []PlannedBinding {
	slices.SortFunc(bs, func(a, b PlannedBinding) int {
		switch {
		case a.Module < b.Module:
			return -1
		case a.Module > b.Module:
			return 1
		}
		return 0
	})
	return bs
}

// KeptOldWarning describes, for ApplyOnce, the clusters that keep an older module version.
func KeptOldWarning(p BindingPlan, spec Spec) string {
	if len(p.KeptOld) == 0 {
		return ""
	}
	msg := "Mode is ApplyOnce, so clusters that already have a module keep the version they got; only clusters without it get the new one:\n"
	for _, name := range sortedNames(p.KeptOld) {
		m, _ := spec.Module(name)
		msg += fmt.Sprintf("  - module %s (version %s, revision %s): %d cluster(s) keep an older version: %v\n",
			name, m.Version, m.Revision, len(p.KeptOld[name]), p.KeptOld[name])
	}
	return msg + "Use mode = \"Reconcile\" to update them in verified waves."
}
