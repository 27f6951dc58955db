package delivery

import (
	"context"
	"slices"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Prior is what the refresh before a plan recorded of a rollout (the resource's prior state),
// given when the configuration picks the same clusters as that state. Terraform plans again
// when it applies, with the same configuration and prior state, and rejects any planned value
// that comes out different ("inconsistent final plan"): so the waves and the leaving clusters
// are worked out from Prior, never from a fresh read of a fleet that may change before apply.
type Prior struct {
	// Clusters are the picked clusters' records as the refresh read them; Skipped, the picked
	// clusters it could not change, with the reason.
	Clusters map[string]ClusterState
	Skipped  map[string]string
	// Leaving are the clusters the refresh found leaving: the only ones apply may let go of.
	Leaving []string
	// Invalid lists the revisions the state's invalid_revisions holds.
	Invalid []string
}

// PlanRequest is one plan of a rollout.
type PlanRequest struct {
	Spec  Spec
	Query fleet.Query
	// Prior, when not nil, is the state the plan is made from (see Prior). Without it (a
	// create, or a change of the clusters picked) the plan is made from the fleet as it reads
	// now, and apply reads it again: Drifted then marks the clusters the last refresh found
	// drifted.
	Prior   *Prior
	Drifted map[string]bool
	// IgnoreClaims says which other keys' claims do not count: the rollout this one replaces.
	IgnoreClaims func(records.Key) bool
	// RefuseAdoption refuses objects someone else made (adopt = false) instead of adopting them.
	RefuseAdoption bool
}

// Refusal is why apply would not carry the plan out: the plan is refused, naming Attribute
// (the resource attribute the fix is in: "manifests", "canary" or "adopt").
type Refusal struct {
	Attribute string
	Err       error
}

// Refuse is the refusal err (nil for none) on attribute.
func Refuse(attribute string, err error) *Refusal {
	if err == nil {
		return nil
	}
	return &Refusal{Attribute: attribute, Err: err}
}

// PlanResult is what a plan of a rollout found and decided, as values: the resource only
// formats them.
type PlanResult struct {
	Observation *Observation
	// FromState says the plan was made from PlanRequest.Prior: its waves and Leaving are what
	// apply carries out. Otherwise apply reads the fleet again and they are known after apply.
	FromState bool
	Plan      engine.Plan
	// Leaving are the clusters apply lets go of (from Prior only).
	Leaving []string
	// Refused is set when apply would refuse: the checks after it did not run.
	Refused *Refusal
	// InvalidKept is set when the revision is recorded invalid but runs on some clusters
	// already (it failed elsewhere within max_failures): it stays there and goes nowhere else.
	InvalidKept error
	// Exists says a Terraform state holds the rollout already and this plan creates it: apply
	// refuses, unless the plan replaces it under the same name (its destroy goes first).
	Exists bool
	// Changing are the clusters the waves change that the fleet still offers: the ones the
	// manifests, claims and adoptions were checked on.
	Changing []string
	// Adoptions are the objects someone else made that apply takes over.
	Adoptions []Found
	// Preview is what the dry-run of the revision found on the clusters Spec.Preview picks
	// among Changing; nil when it picks none.
	Preview *Preview
}

// Plan reads the fleet once and decides what an apply of req.Spec would do: the waves, the
// clusters let go of, and whether the revision is refused (lost contact, the invalid ledger, a
// canary gap, manifests a cluster cannot take, objects another rollout owns, adoption refused).
// Errors are failures to read; refusals are in the result.
func (s *Service) Plan(ctx context.Context, req PlanRequest) (*PlanResult, error) {
	spec := req.Spec
	obs, err := s.Planning().Observe(ctx, req.Query, spec.Key, spec.RecordNamespace, false)
	if err != nil {
		return nil, err
	}
	// A window annotation that cannot be read is bad input: the plan fails naming the cluster
	// (apply, which may not refuse, skips such a cluster with the same words).
	if err := obs.Discovery.WindowProblems(); err != nil {
		return nil, err
	}
	// Each cluster's variables come from its Cluster as it reads now; one that misses a
	// variable refuses the plan.
	if err := spec.Render(obs.Discovery.Clusters); err != nil {
		return &PlanResult{Observation: obs, Refused: Refuse("manifests", err)}, nil
	}
	req.Spec = spec
	// A cluster whose records hold nothing but which holds objects of this revision under the
	// rollout's field manager is records-missing: held back below (decide), shown in the plan.
	s.markUnrecorded(ctx, spec.ClusterNamespace, spec.Key, obs, false, spec.ObjectsFor)
	res := decide(obs, req)
	if res.Refused != nil {
		return res, nil
	}
	// The check every changing cluster gets is where the dry-run preview runs too: one pass.
	res.Preview, err = s.CheckAndPreview(ctx, spec, res.Changing, PreviewTargets(spec.Preview.mode(), res.Plan, res.Changing))
	if res.Refused = Refuse("manifests", err); res.Refused != nil {
		return res, nil
	}
	if res.Refused = Refuse("manifests", res.Preview.Refusal()); res.Refused != nil {
		return res, nil
	}
	if len(res.Changing) == 0 {
		return res, nil
	}
	claims, adoptions, err := s.Ownership(ctx, spec, res.Changing, req.IgnoreClaims)
	if err != nil {
		return nil, err
	}
	if len(claims) > 0 {
		res.Refused = &Refusal{Attribute: "manifests", Err: ClaimsError(claims, spec.Key.Describe())}
		return res, nil
	}
	// What a cluster moving from another engine holds is what that engine delivered of this
	// same content: the rollout's own, adopted by nothing (move.go).
	res.Adoptions = slices.DeleteFunc(adoptions, func(f Found) bool { _, moving := obs.Moving[f.Cluster]; return moving })
	if len(res.Adoptions) > 0 && req.RefuseAdoption {
		res.Refused = &Refusal{Attribute: "adopt", Err: AdoptRefused(res.Adoptions, spec.Key.Describe())}
	}
	return res, nil
}

// decide is the part of Plan that reads nothing: from what the fleet says (obs) and the request,
// the targets, the waves and the refusals that need no cluster's answer.
func decide(obs *Observation, req PlanRequest) *PlanResult {
	spec := req.Spec
	res := &PlanResult{Observation: obs}
	targets := MarkDrifted(obs.Targets, req.Drifted)
	var priorInvalid bool
	clusters := obs.Clusters
	if req.Prior != nil {
		targets, res.FromState = RecordedTargets(req.Prior.Clusters, req.Prior.Skipped), true
		res.Leaving = slices.Clone(req.Prior.Leaving)
		priorInvalid = slices.Contains(req.Prior.Invalid, spec.Revision)
		clusters = req.Prior.Clusters
	}
	// Records missing is judged where the waves come from: the state, when planned from it.
	targets = HoldUnrecorded(targets, clusters, spec.AdoptUnrecorded)
	res.Exists = obs.Managed
	targets, refusal, kept := revisionVerdict(obs, targets, spec)
	if refusal != nil {
		res.Refused = &Refusal{Attribute: "manifests", Err: refusal}
		return res
	}
	res.InvalidKept = kept
	// The prior state's ledger counts as much as the live one: a plan made from state refuses
	// what that state holds invalid even if the ledger was cleared since.
	if kept == nil && !spec.Retry && priorInvalid {
		targets = RefuseRevision(targets, spec.Revision)
	}
	policy := spec.policy(obs.Discovery)
	if err := emptyStages(policy, targets); err != nil {
		res.Refused = &Refusal{Attribute: "stages", Err: err}
		return res
	}
	res.Plan = engine.PlanRollout(targets, spec.Revision, policy)
	if gaps := res.Plan.CanaryGaps(policy); len(gaps) > 0 {
		res.Refused = &Refusal{Attribute: "canary", Err: usererr.New("Canary Not In The First Wave", CanaryGapsDetail(gaps)+
			"\n\nWithout them the first wave would go straight to the rest of the fleet. Wait until they are ready, remove them "+
			"from canary, or set canary_optional = true to let the rollout go ahead without them.")}
		return res
	}
	// A cluster that became unreachable since the refresh is left out by apply, with a warning,
	// not refused here: only the planned clusters the fleet still offers are checked.
	for _, wave := range res.Plan.Waves {
		for _, name := range wave {
			if _, eligible := obs.Clusters[name]; eligible {
				res.Changing = append(res.Changing, name)
			}
		}
	}
	return res
}

// revisionVerdict is the one decision, at plan and at apply, on whether spec's revision may go
// ahead: refused when the last run of it lost contact with clusters after its change began, or
// when the ledger holds it invalid and no cluster runs it (unless Spec.Retry). When clusters
// run it already, it is kept where it runs and taken nowhere else: targets come back refused,
// and kept says why.
func revisionVerdict(obs *Observation, targets []engine.Target, spec Spec) (_ []engine.Target, refusal, kept error) {
	if err := obs.LostContactRefusal(spec.Revision, spec.Key.Describe(), spec.Retry); err != nil {
		return targets, err, nil
	}
	entry, ok := obs.Invalid(spec.Revision)
	if !ok || spec.Retry {
		return targets, nil, nil
	}
	why := InvalidRefusal(spec.Key.Describe(), spec.Revision, spec.RecordNamespace, entry, true)
	if !RunsRevision(targets, spec.Revision) {
		return targets, why, nil
	}
	return RefuseRevision(targets, spec.Revision), nil, why
}
