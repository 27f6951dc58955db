package delivery

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// StageSpec is one stage of a rollout as configured: the clusters it names, or those whose
// labels include MatchLabels (both may be given: a cluster matching either belongs), with its
// own limits (the rollout's where the configuration leaves them out).
type StageSpec struct {
	Name        string
	Names       []string
	MatchLabels map[string]string
	UpdateLimit engine.Limit
	MaxFailures engine.Limit
	BakeTime    time.Duration
}

// picks says whether the stage picks cluster c.
func (s StageSpec) picks(c fleet.Cluster) bool {
	for _, n := range s.Names {
		if n == c.Name {
			return true
		}
	}
	return len(s.MatchLabels) > 0 && labels.SelectorFromSet(s.MatchLabels).Matches(labels.Set(c.Labels))
}

// policy returns spec.Policy with its stages' members resolved against the clusters of d, as the
// fleet reads now. A cluster picked by two stages belongs to the first (engine.Stage).
func (spec Spec) policy(d *fleet.Discovery) engine.Policy {
	p := spec.Policy
	if len(spec.Stages) == 0 {
		return p
	}
	p.Stages = make([]engine.Stage, len(spec.Stages))
	for i, st := range spec.Stages {
		p.Stages[i] = engine.Stage{Name: st.Name, UpdateLimit: st.UpdateLimit, MaxFailures: st.MaxFailures, BakeTime: st.BakeTime}
		if d == nil {
			continue
		}
		for _, c := range d.Clusters {
			if st.picks(c) {
				p.Stages[i].Members = append(p.Stages[i].Members, c.Name)
			}
		}
	}
	return p
}

// emptyStages refuses a plan whose stages include one that picks none of the rollout's clusters
// (targets): a typo in a name or a selector would otherwise leave that stage's clusters waiting
// in no stage, with nothing said.
func emptyStages(p engine.Policy, targets []engine.Target) error {
	picked := make(map[string]bool, len(targets))
	for _, t := range targets {
		picked[t.Name] = true
	}
	var empty []string
	for _, st := range p.Stages {
		n := 0
		for _, m := range st.Members {
			if picked[m] {
				n++
			}
		}
		if n == 0 {
			empty = append(empty, st.Name)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	return usererr.New("Stage Picks No Cluster", fmt.Sprintf(
		"These stages pick none of the clusters this rollout picks: %s. Check each stage's names and match_labels against the Clusters' names and labels.",
		strings.Join(empty, ", ")))
}

// Waiting names the clusters of d that spec's stages leave for a later promotion (in a stage
// after Policy.PromoteUntil) or leave alone (in no stage); nil without stages. Canaries never
// wait: they go first. A refresh counts such clusters apart rather than listing each as needing
// attention, so that a plan stays short while most of a large fleet waits for its stage.
func (spec Spec) Waiting(d *fleet.Discovery) map[string]bool {
	if len(spec.Stages) == 0 || d == nil {
		return nil
	}
	last := len(spec.Stages)
	for i, st := range spec.Stages {
		if st.Name == spec.Policy.PromoteUntil {
			last = i + 1
		}
	}
	canary := map[string]bool{}
	for _, name := range spec.Policy.Canary {
		canary[name] = true
	}
	out := map[string]bool{}
	for _, c := range d.Clusters {
		if canary[c.Name] {
			continue
		}
		stage := 0
		for i, st := range spec.Stages {
			if st.picks(c) {
				stage = i + 1
				break
			}
		}
		if stage == 0 || stage > last {
			out[c.Name] = true
		}
	}
	return out
}
