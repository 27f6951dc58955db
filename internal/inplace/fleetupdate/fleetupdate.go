package fleetupdate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Planner previews the machines of the clusters' owners (owners.Planner). Tests give a fake.
type Planner interface {
	PlanFleet(ctx context.Context, req owners.FleetRequest) (*owners.FleetPlan, error)
}

// Updater writes and verifies one planned cluster (ownerupdate.Updater). Tests give a fake.
type Updater interface {
	ApplyCluster(ctx context.Context, cp *owners.ClusterPlan, req ownerupdate.ExecuteRequest) (map[string]string, error)
	VerifyCluster(ctx context.Context, cp *owners.ClusterPlan, req ownerupdate.ExecuteRequest) (map[string]string, error)
}

// Discoverer lists the clusters a query picks (fleet.Management).
type Discoverer interface {
	Discover(ctx context.Context, q fleet.Query) (*fleet.Discovery, error)
}

// Service plans and runs in-place updates against one management cluster, both forms through
// one pair, Plan and Apply (Spec.Owner says which), and refreshes the fleet form (Refresh).
type Service struct {
	Fleet    Discoverer
	Planner  Planner
	Updater  Updater
	Observer Observer
	// OwnerPlanner and OwnerUpdater serve the single-owner form (Spec.Owner).
	OwnerPlanner OwnerPlanner
	OwnerUpdater OwnerUpdater
	// Settings are the provider's: Parallelism bounds the clusters a refresh reads at once.
	// Unset ones take their defaults.
	Settings settings.Settings
}

// Spec is one in-place update: the change and, either one owner of one cluster (Owner, the
// single-owner form: no waves, Query, Owners and Policy unused), or the clusters and owners a
// fleet query picks and how they are paced (Policy must then be valid, engine.Policy.Validate,
// and Irreversible).
type Spec struct {
	// Owner is the one owner of the single-owner form; nil for the fleet form.
	Owner     *owners.Selection
	Query     fleet.Query
	Owners    owners.Pick
	Change    inplace.Change
	Fallback  inplace.Fallback
	Endpoints []extension.Endpoint
	Policy    engine.Policy
}

// Revision is the spec's revision (owners.Revision of its change).
func (s Spec) Revision() string { return owners.Revision(s.Change) }

// skipUnmanaged: clusters picked by selector (no names) that have no managed topology are
// skipped when the change has topology variables; a cluster named (`cluster`, `names`) is
// refused instead: naming it says it was meant (owners.FleetRequest.SkipUnmanaged).
func (s Spec) skipUnmanaged() bool { return len(s.Query.Names) == 0 }

// ownerRequest is the owners' request to plan the one owner of the single-owner form.
func (s Spec) ownerRequest() owners.Request {
	return owners.Request{Selection: *s.Owner, Change: s.Change, Fallback: s.Fallback, Endpoints: s.Endpoints}
}

// request is the owners' request to plan clusters.
func (s Spec) request(clusters []string) owners.FleetRequest {
	return owners.FleetRequest{
		Namespace: s.Query.Namespace, Clusters: clusters, Owners: s.Owners, Change: s.Change, Fallback: s.Fallback, Endpoints: s.Endpoints,
		SkipUnmanaged: s.skipUnmanaged(),
	}
}

// ClusterFacts is what a refresh recorded of one picked cluster, without asking any extension:
// enough to plan its wave again, identically, when Terraform plans during apply.
type ClusterFacts struct {
	// Skip says why the cluster cannot be updated ("" when it can).
	Skip string `json:"skip,omitempty"`
	// Recorded is the revision every selected owner carries (owners.AnnotationRevision), ""
	// when they differ or none does.
	Recorded string `json:"recorded,omitempty"`
	// Settled: every machine was as Recorded wants and Cluster API was done with it, and every
	// topology variable of the change held its value.
	Settled bool `json:"settled,omitempty"`
	// Drift says which topology variables of the change the Cluster no longer holds, with its
	// value and the configured one ("" when all hold theirs): changed outside Terraform since
	// the apply, so the next apply writes them again.
	Drift string `json:"drift,omitempty"`
}

// Prior is what the refresh before a plan recorded: the picked clusters' facts, given when the
// configuration picks the same clusters as the state (see the package doc).
type Prior struct {
	// Revision is the state's revision: the one the facts' Settled was judged against.
	Revision string
	Clusters map[string]ClusterFacts
}

// targets turns the facts into the engine's targets for revision: a cluster recorded and
// settled on it is current, one recorded but not settled (an earlier apply wrote it and did not
// see it through) is applied again.
func (p *Prior) targets(revision string) []engine.Target {
	names := make([]string, 0, len(p.Clusters))
	for n := range p.Clusters {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]engine.Target, 0, len(names))
	for _, n := range names {
		f := p.Clusters[n]
		t := engine.Target{Name: n, SkipReason: f.Skip}
		switch {
		case f.Recorded == revision && f.Settled && p.Revision == revision:
			t.Record.Current = revision
		case f.Recorded == revision:
			t.Record.Provisioning = revision
		}
		out = append(out, t)
	}
	return out
}

// Strategies is each machine's planned strategy (inplace.Strategy), keyed "cluster/machine".
type Strategies map[string]inplace.Strategy

// strategiesOf is the planned strategy of each machine of the clusters of fp.
func strategiesOf(fp *owners.FleetPlan) Strategies {
	out := Strategies{}
	for _, c := range fp.Clusters {
		for _, m := range c.Machines() {
			out[c.Cluster+"/"+m.Machine] = m.Strategy
		}
	}
	return out
}

// Differences lists, for the clusters of now, where now departs from p in a way that makes
// the wave worse than planned: a machine planned in place (or unchanged) now replaced or
// blocked, a new machine that would be replaced. A machine that now needs less is no
// difference.
func (p Strategies) Differences(now Strategies, clusters []string) []string {
	in := map[string]bool{}
	for _, c := range clusters {
		in[c] = true
	}
	var out []string
	for key, s := range now {
		cluster, _, _ := strings.Cut(key, "/")
		if !in[cluster] {
			continue
		}
		was, known := p[key]
		worse := s == inplace.StrategyRolling || s == inplace.StrategyBlocked
		switch {
		case !known && worse:
			out = append(out, fmt.Sprintf("machine %s: not in the plan, now %s", key, s))
		case known && worse && was != s && was != inplace.StrategyBlocked:
			out = append(out, fmt.Sprintf("machine %s: planned %s, now %s", key, was, s))
		}
	}
	slices.Sort(out)
	return out
}

// PlanResult is what Plan found and decided. For the single-owner form it holds Revision, Owner
// (the owner's plan) and Blocked, nothing else: the form has no waves, no fleet and no prior.
type PlanResult struct {
	Revision string
	// Owner is the single-owner form's plan, nil for the fleet form.
	Owner *OwnerPlan
	// FromState: the waves were cut from Prior; apply carries them out. Otherwise they are the
	// fleet as it reads now, and apply reads it again.
	FromState bool
	Plan      engine.Plan
	// Live is the preview as the fleet and the extensions answer now (for warnings).
	Live       *owners.FleetPlan
	Strategies Strategies
	// Skipped are the picked clusters that cannot be updated, with why (from the state when
	// FromState).
	Skipped map[string]string
	// Missing are clusters named that do not exist (an error without Prior, a note with it).
	Missing []string
	// Drifted are the clusters whose topology variables the refresh found changed outside
	// Terraform (ClusterFacts.Drift), with what it found (FromState only).
	Drifted map[string]string
	// Notes are worth a warning each.
	Notes []string
	// Blocked names the machines that would be replaced under fallback "none", by cluster;
	// apply refuses such a plan.
	Blocked error
}

// ErrMissing is the refusal of a plan that names clusters that do not exist (without a state
// to plan from).
var ErrMissing = errors.New("cluster not found")

// ErrCanary is the refusal of a plan whose canary clusters are not all in its canary waves.
var ErrCanary = errors.New("canary not in the first wave")

// Plan plans spec. It writes nothing. The single-owner form (spec.Owner) plans the owner's
// machines (prior is unused; see planOwner). For the fleet form the waves come from prior when it
// is given (see Prior); the live preview is always taken (blocked machines are
// PlanResult.Blocked). A plan whose canaries are missing from the canary waves (ErrCanary), or
// that names clusters that do not exist without a state to plan from (ErrMissing), is refused
// (usererr).
func (s *Service) Plan(ctx context.Context, spec Spec, prior *Prior) (*PlanResult, error) {
	if spec.Owner != nil {
		return s.planOwner(ctx, spec)
	}
	found, err := s.Fleet.Discover(ctx, spec.Query)
	if err != nil {
		return nil, err
	}
	if len(found.Missing) > 0 && prior == nil {
		return nil, usererr.Wrap(ErrMissing, "Cluster Not Found", fmt.Sprintf("No Cluster %s in namespace %q of the management cluster.", strings.Join(found.Missing, ", "), spec.Query.Namespace))
	}
	out := &PlanResult{Revision: spec.Revision(), Missing: found.Missing, Skipped: map[string]string{}}
	live, liveTargets, err := s.planFleet(ctx, spec, found)
	if err != nil {
		return nil, err
	}
	out.Live, out.Strategies = live, strategiesOf(live)
	out.Notes = append(out.Notes, live.Notes...)
	out.Blocked = live.Err()
	targets := liveTargets
	if prior != nil {
		out.FromState = true
		targets = prior.targets(out.Revision)
		for n, f := range prior.Clusters {
			// Drift is judged against the state's change: shown while the configuration
			// wants the same one.
			if f.Drift != "" && f.Skip == "" && prior.Revision == out.Revision {
				if out.Drifted == nil {
					out.Drifted = map[string]string{}
				}
				out.Drifted[n] = f.Drift
			}
		}
	}
	for _, t := range targets {
		if t.SkipReason != "" {
			out.Skipped[t.Name] = t.SkipReason
		}
	}
	out.Plan = engine.PlanRollout(targets, out.Revision, spec.Policy)
	if err := canaryRefusal(out.Plan, spec.Policy); err != nil {
		return nil, err
	}
	return out, nil
}

// planFleet asks the owners and extensions of the eligible clusters of found, and returns the
// engine's targets as the fleet reads now.
func (s *Service) planFleet(ctx context.Context, spec Spec, found *fleet.Discovery) (*owners.FleetPlan, []engine.Target, error) {
	skipped := map[string]string{}
	var eligible, picked []string
	for _, c := range found.Clusters {
		picked = append(picked, c.Name)
		if c.SkipReason != "" {
			skipped[c.Name] = c.SkipReason
			continue
		}
		eligible = append(eligible, c.Name)
	}
	fp, err := s.Planner.PlanFleet(ctx, spec.request(eligible))
	if err != nil {
		return nil, nil, err
	}
	rev := fp.Revision
	var targets []engine.Target
	for _, name := range picked {
		t := engine.Target{Name: name, SkipReason: skipped[name]}
		if cp := fp.Cluster(name); cp != nil {
			if cp.SkipReason != "" {
				t.SkipReason = cp.SkipReason
			}
			switch {
			case cp.Current(rev):
				t.Record.Current = rev
			case cp.Recorded(rev):
				t.Record.Provisioning = rev
			}
		}
		targets = append(targets, t)
	}
	return fp, targets, nil
}

// canaryRefusal refuses a plan whose listed canaries are not in its canary waves, as the
// rollout does: without them the first wave would go to the rest of the fleet.
func canaryRefusal(p engine.Plan, policy engine.Policy) error {
	gaps := p.CanaryGaps(policy)
	if len(gaps) == 0 {
		return nil
	}
	lines := make([]string, 0, len(gaps))
	for _, g := range gaps {
		lines = append(lines, fmt.Sprintf("  %s: %s", g.Name, g.Reason))
	}
	return usererr.Wrap(ErrCanary, "Canary Not In The First Wave",
		"The canary clusters must be the first to change, and these cannot be:\n"+strings.Join(lines, "\n")+
			"\nFix or pick them, or change `canary`; nothing was written.")
}
