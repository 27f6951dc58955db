package assignment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
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

// CheckClaims refuses modules whose objects another owner (another assignment's module, a
// rollout, or another module of this assignment) already manages on the clusters that would
// get them. It changes nothing.
func CheckClaims(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) error {
	return checkClaims(ctx, svc, spec, apply)
}

func checkClaims(ctx context.Context, svc deliverer, spec Spec, apply map[string][]string) error {
	var all []delivery.Claim
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		claims, err := svc.Claims(ctx, spec.moduleSpec(m), apply[m.Name], nil)
		if err != nil {
			return err
		}
		all = append(all, claims...)
	}
	if len(all) == 0 {
		return nil
	}
	return delivery.ClaimsError(all, spec.Key.Describe())
}

// Adoptions lists, per module, the objects that exist already on the clusters that would get
// it, made by someone else: apply adopts them (delivery.Service.Adoptions). It changes nothing.
func Adoptions(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) ([]delivery.Found, error) {
	var all []delivery.Found
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		found, err := svc.Adoptions(ctx, spec.moduleSpec(m), apply[m.Name])
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		all = append(all, found...)
	}
	return all, nil
}

// CheckManifests asks each cluster that gets a module whether it can take the module's objects
// (with those of the modules it depends on, so a CRD from a dependency counts), and dry-runs
// them (server-side, as apply would send them) on the clusters spec.Preview picks among
// apply (PreviewTargets): the module's canary waves (or first wave) for "canary", all of apply
// for "all". The dry-runs of
// all modules share one time budget. It changes nothing; what the dry-runs found is in the
// previews (one per module that previewed, labelled with it), rejections included.
func CheckManifests(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string, waves map[string][][]string) ([]*delivery.Preview, error) {
	spec.Preview = spec.Preview.Shared(clock.System{}.Now()) // the wall clock: the budget is a context deadline
	var previews []*delivery.Preview
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		pv, err := svc.CheckAndPreview(ctx, spec.checkedSpec(m, apply[m.Name]), apply[m.Name], PreviewTargets(spec.Preview.Mode, waves[m.Name], spec.Policy.Canary, apply[m.Name]))
		if err != nil {
			return previews, fmt.Errorf("module %s: %w", m.Name, err)
		}
		if pv != nil {
			pv.Label = "module " + m.Name
			previews = append(previews, pv)
		}
	}
	return previews, nil
}

// PreviewTargets are the clusters of one module's change that mode dry-runs, as for a rollout
// (delivery.PreviewTargets): none, all of changing, or ("canary", the default) those of its
// canary waves, the leading waves of canary clusters alone, or of its first wave without them.
func PreviewTargets(mode string, waves [][]string, canary, changing []string) []string {
	n := 0
	for _, wave := range waves {
		if !slices.ContainsFunc(wave, func(c string) bool { return !slices.Contains(canary, c) }) {
			n++
			continue
		}
		break
	}
	return delivery.PreviewTargets(mode, engine.Plan{Waves: waves, CanaryWaves: n}, changing)
}

// PreviewText is what the modules' dry-runs found, one paragraph per module; "" when there is
// nothing to say.
func PreviewText(previews []*delivery.Preview) string {
	var parts []string
	skipped := map[string]bool{} // through Flux every module skips for the same reason: said once
	for _, pv := range previews {
		if pv.Skipped != "" {
			if !skipped[pv.Skipped] {
				parts = append(parts, pv.Text())
			}
			skipped[pv.Skipped] = true
			continue
		}
		if text := pv.Text(); text != "" {
			parts = append(parts, pv.Label+": "+text)
		}
	}
	return strings.Join(parts, "\n\n")
}
