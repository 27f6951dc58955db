package assignment

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// Render renders every module for each eligible cluster of clusters with that cluster's
// variables (delivery.Values.For), keeping the results in each module's Rendered. Without
// Values it does nothing. A cluster missing a variable that a module uses without a default
// fails the whole render, naming every such cluster, module and variable: nothing may be
// applied anywhere, as for a rollout (delivery.Spec.Render).
func (s *Spec) Render(clusters []fleet.Cluster) error {
	if s.Values == nil {
		return nil
	}
	var problems []string
	for i := range s.Modules {
		m := &s.Modules[i]
		var missing map[string]string
		m.Rendered, missing = s.Values.Render(m.Objects, clusters, m.Redact)
		for cluster, why := range missing {
			problems = append(problems, fmt.Sprintf("%s: module %s: %s", cluster, m.Name, why))
		}
	}
	// The check Job is rendered as the modules are: a variable it lacks refuses the plan too.
	if s.CheckJob != nil {
		s.CheckJob = new(*s.CheckJob) // the caller's Spec keeps its own
		for cluster, why := range s.CheckJob.Render(s.Values, clusters, nil) {
			problems = append(problems, fmt.Sprintf("%s: verify.check_job: %s", cluster, why))
		}
	}
	if len(problems) > 0 {
		return delivery.MissingVariables("The modules of "+s.Key.Describe()+" cannot be rendered for these clusters, so nothing is applied anywhere:", problems)
	}
	return nil
}

// checkedSpec is the delivery spec CheckManifests asks clusters about for m: its objects with
// those of the modules it depends on (so a CRD from a dependency counts), rendered for each of
// clusters when the assignment has values.
func (s Spec) checkedSpec(m Module, clusters []string) delivery.Spec {
	ms := s.moduleSpec(m)
	ms.Objects = withDependencies(s, m, func(d Module) []*unstructured.Unstructured { return d.Objects.Objects })
	if s.Values == nil {
		return ms
	}
	ms.Rendered = make(map[string]*manifest.Set, len(clusters))
	for _, c := range clusters {
		complete := true
		set := withDependencies(s, m, func(d Module) []*unstructured.Unstructured {
			r, ok := d.Rendered[c]
			if !ok {
				complete = false
				return nil
			}
			return r.Objects
		})
		// A cluster some module was not rendered for is left out: delivery then refuses it
		// (delivery.Spec.ObjectsFor) rather than check a part of what it would get.
		if complete {
			ms.Rendered[c] = set
		}
	}
	return ms
}
