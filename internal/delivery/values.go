package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// The variables every cluster has; the configuration cannot give them.
const (
	VarClusterName      = "cluster_name"
	VarClusterNamespace = "cluster_namespace"
)

// Values says where each cluster's substitution variables come from (a rollout's `values`).
// For one cluster, later sources win: ClusterClass topology variables, then FromLabels, then
// FromAnnotations, then the Selected entries whose labels the cluster has (in order), then
// Clusters[name]; cluster_name and cluster_namespace are always the Cluster's own.
type Values struct {
	// FromLabels and FromAnnotations map a variable name to the Cluster label (annotation) key
	// whose value it takes; a cluster without that label leaves the variable unset.
	FromLabels      map[string]string `json:"from_labels,omitempty"`
	FromAnnotations map[string]string `json:"from_annotations,omitempty"`
	// Selected gives variables to the clusters whose labels match.
	Selected []SelectedValues `json:"selected,omitempty"`
	// Clusters gives variables to clusters by name.
	Clusters map[string]map[string]string `json:"clusters,omitempty"`
}

// SelectedValues are variables for the clusters whose labels include MatchLabels.
type SelectedValues struct {
	MatchLabels map[string]string `json:"match_labels"`
	Values      map[string]string `json:"values"`
}

// Validate checks every variable name the configuration gives: Flux's rule for names, and
// not one of the Cluster's own.
func (v *Values) Validate() error {
	var bad []string
	check := func(where string, names []string) {
		for _, name := range names {
			switch {
			case name == VarClusterName || name == VarClusterNamespace:
				bad = append(bad, fmt.Sprintf("%s: %q is set from the Cluster itself and cannot be given", where, name))
			case !manifest.ValidVariableName(name):
				bad = append(bad, fmt.Sprintf("%s: %q is not a variable name (a letter or _, then letters, digits or _)", where, name))
			}
		}
	}
	check("from_labels", slices.Sorted(maps.Keys(v.FromLabels)))
	check("from_annotations", slices.Sorted(maps.Keys(v.FromAnnotations)))
	for i, s := range v.Selected {
		check(fmt.Sprintf("selected[%d].values", i), slices.Sorted(maps.Keys(s.Values)))
	}
	for _, name := range slices.Sorted(maps.Keys(v.Clusters)) {
		check(fmt.Sprintf("clusters[%q]", name), slices.Sorted(maps.Keys(v.Clusters[name])))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// Settings is the canonical form of v for the revision: the template and these rules make the
// revision, so a change of the configured values is a new revision, rolled out in waves like
// any other. A change of what the fleet says (a label) is not: it changes the clusters it
// touches, within the same revision.
func (v *Values) Settings() []byte {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v) // maps and slices of strings: encoding cannot fail, and sorts keys
	return append([]byte("values:"), b...)
}

// For returns the variables of cluster c.
func (v *Values) For(c fleet.Cluster) map[string]string {
	out := map[string]string{}
	for name, raw := range c.TopologyVariables {
		if manifest.ValidVariableName(name) {
			out[name] = topologyValue(raw)
		}
	}
	for name, key := range v.FromLabels {
		if value, ok := c.Labels[key]; ok {
			out[name] = value
		}
	}
	for name, key := range v.FromAnnotations {
		if value, ok := c.Annotations[key]; ok {
			out[name] = value
		}
	}
	for _, s := range v.Selected {
		if labels.SelectorFromSet(s.MatchLabels).Matches(labels.Set(c.Labels)) {
			maps.Copy(out, s.Values)
		}
	}
	maps.Copy(out, v.Clusters[c.Name])
	out[VarClusterName], out[VarClusterNamespace] = c.Name, c.Namespace
	return out
}

// topologyValue is a ClusterClass variable as text: a JSON string's content, anything else
// (numbers, booleans, objects) its JSON.
func topologyValue(raw string) string {
	var s string
	if json.Unmarshal([]byte(raw), &s) == nil {
		return s
	}
	return raw
}

// Render substitutes the values of every eligible cluster of clusters into spec's objects and
// keeps the results (see ObjectsFor). Without Values it does nothing. A cluster missing a
// variable the bundle uses without a default fails the whole render, naming every such
// cluster and variable: nothing may be applied anywhere.
func (spec *Spec) Render(clusters []fleet.Cluster) error {
	if spec.Values == nil {
		return nil
	}
	var problems map[string]string
	spec.Rendered, problems = spec.Values.Render(spec.Objects, clusters, spec.Redact)
	spec.Variables = make(map[string]map[string]string, len(spec.Rendered))
	for _, c := range clusters {
		if _, ok := spec.Rendered[c.Name]; ok {
			spec.Variables[c.Name] = spec.Values.For(c)
		}
	}
	lines := make([]string, 0, len(problems))
	for cluster, why := range problems {
		lines = append(lines, cluster+": "+why)
	}
	// The check Job is rendered as the manifests are: a variable it lacks refuses the plan too.
	if spec.CheckJob != nil {
		spec.CheckJob = new(*spec.CheckJob) // the caller's Spec keeps its own
		for cluster, why := range spec.CheckJob.Render(spec.Values, clusters, spec.Redact) {
			lines = append(lines, cluster+": verify.check_job: "+why)
		}
	}
	if len(lines) > 0 {
		return MissingVariables("The manifests of "+spec.Key.Describe()+" cannot be rendered for these clusters, so nothing is applied anywhere:", lines)
	}
	return nil
}

// Render substitutes each eligible cluster's variables (For) into template: what was rendered,
// by cluster name, and, for each cluster that cannot be rendered, why (naming the variables it
// misses). redactValues lists the values errors must not repeat (the sensitive half's, see
// Spec.Redact).
func (v *Values) Render(template *manifest.Set, clusters []fleet.Cluster, redactValues []string) (map[string]*manifest.Set, map[string]string) {
	rendered := make(map[string]*manifest.Set, len(clusters))
	problems := map[string]string{}
	for _, c := range clusters {
		if !c.Eligible() {
			continue
		}
		set, err := manifest.Substitute(template, v.For(c))
		if err != nil {
			if m, ok := manifest.IsMissingVariables(err); ok {
				err = m // names variables and objects only: nothing to redact
			} else {
				err = redact(err, redactValues)
			}
			problems[c.Name] = err.Error()
			continue
		}
		rendered[c.Name] = set
	}
	return rendered, problems
}

// MissingVariables is the refusal of a bundle that cannot be rendered for some clusters:
// intro, then each problem ("cluster: why") on its own line, sorted, then what to do.
func MissingVariables(intro string, problems []string) error {
	problems = slices.Sorted(slices.Values(problems))
	return usererr.New("Missing Variable", intro+"\n  "+strings.Join(problems, "\n  ")+
		"\n\nGive the variable in `values` (from_labels, from_annotations, selected or clusters), label or annotate the Cluster, or write a default: ${name:=default}.")
}

// ObjectsFor returns the objects applied to cluster: rendered for it when the rollout has
// values (Render must have run for it; a cluster it did not render gets an error, never the
// template), else the bundle as given.
func (spec *Spec) ObjectsFor(cluster string) ([]*unstructured.Unstructured, error) {
	set, err := spec.SetFor(cluster)
	if err != nil {
		return nil, err
	}
	return set.Objects, nil
}

// SetFor is ObjectsFor as a set.
func (spec *Spec) SetFor(cluster string) (*manifest.Set, error) {
	if spec.Values == nil {
		return spec.Objects, nil
	}
	if set, ok := spec.Rendered[cluster]; ok {
		return set, nil
	}
	return nil, fmt.Errorf("the manifests were not rendered for cluster %s (it was not eligible when the fleet was read); the next plan renders it", cluster)
}

// RenderedChanges compares what a cluster's current record holds (recorded, canonical JSON)
// with what the bundle renders for it now, and lists the objects that differ ("Kind ns/name"),
// sorted. With onlyRendered, objects the record holds that rendered does not are not counted:
// a refresh renders the public half of a bundle only (the sensitive half is write-only).
func RenderedChanges(recorded []byte, rendered *manifest.Set, onlyRendered bool) ([]string, error) {
	held, err := manifest.FromCanonical(recorded)
	if err != nil {
		return nil, err
	}
	canon := func(obj *unstructured.Unstructured) string {
		b, _ := json.Marshal(obj.Object)
		return string(b)
	}
	before := map[string]string{}
	for _, obj := range held.Objects {
		before[manifest.Key(obj)] = canon(obj)
	}
	var out []string
	seen := map[string]bool{}
	for _, obj := range rendered.Objects {
		k := manifest.Key(obj)
		seen[k] = true
		if before[k] != canon(obj) {
			out = append(out, k)
		}
	}
	if !onlyRendered {
		for k := range before {
			if !seen[k] {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
