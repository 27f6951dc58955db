// Package assignment delivers the modules of a module assignment to every cluster it picks. Each
// module is a rollout of its own through internal/delivery (revision records, verified waves,
// restore, invalid ledger, Lease), keyed records.Key{Kind: "module", Name: "<assignment>.<module>"};
// modules go out in depends_on order, a module failing on a cluster blocks its dependents there
// only, and what each cluster got is recorded in per-cluster bindings in the management cluster
// (records.BindingStore), like CAPI's ClusterResourceSetBinding.
package assignment

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Mode says when a module is applied again to a cluster that has it.
type Mode string

const (
	// ApplyOnce applies a module once per cluster, like ClusterResourceSet: a cluster with a
	// binding for the module keeps what it got, even when the module changes.
	ApplyOnce Mode = "ApplyOnce"
	// Reconcile re-applies a module when it changes (in verified waves) or its objects drift.
	Reconcile Mode = "Reconcile"
)

// Record kinds.
const (
	KeyKind    = records.KindAssignment
	ModuleKind = records.KindModule
)

// Module is one bundle of an assignment.
type Module struct {
	Name      string
	Version   string
	Objects   *manifest.Set
	Revision  string
	DependsOn []string
	// Redact lists the values at sensitive_paths in the module's sensitive half, which errors
	// must not repeat (see delivery.Spec.Redact).
	Redact []string
	// Rendered holds, with Spec.Values, what Objects render for each eligible cluster, by name
	// (Spec.Render).
	Rendered map[string]*manifest.Set
	// MovedFromRevision is, while the assignment moves between engines, the revision Objects
	// have under the engine it moves from (its pull settings in place of the new one's: they are
	// part of a revision): a cluster bound to it runs the configured content, which the move pins
	// on the new engine (move.go). Empty when it moves from none.
	MovedFromRevision string
}

// Spec is one assignment as configured.
type Spec struct {
	Key              records.Key
	ClusterNamespace string
	RecordNamespace  string
	// Modules in depends_on order (see Order).
	Modules []Module
	Mode    Mode
	Policy  engine.Policy
	// Orphan leaves the objects of clusters that stop matching (and on destroy).
	Orphan bool
	// Ignore names fields left to other controllers in every module (ignore_fields).
	Ignore apply.Ignore
	// ForceConflicts takes fields another server-side applier owns (force_conflicts), as a
	// rollout's does.
	ForceConflicts bool
	// Retry applies a module's revision even when it is recorded invalid (retry_invalid).
	Retry bool
	// Values, when set, makes every module's Objects a template rendered for each cluster with
	// its own variables (values), as a rollout's are; each module's revision names its template
	// and these rules.
	Values *delivery.Values
	// Health and ClusterGates are verify.health_checks and verify.cluster_gates, the same for
	// every module (delivery.Spec).
	Health       *health.Checker
	ClusterGates bool
	// GatePolicy is verify.node_gate (delivery.Spec.GatePolicy).
	GatePolicy blame.GatePolicy
	// Preview says which clusters a plan dry-runs the modules on (preview): per module, those
	// of its canary waves or first wave (canary) or every cluster it changes (all), within one
	// budget for all modules (CheckManifests, PreviewTargets); apply does not use it.
	Preview delivery.PreviewSpec
	// CheckJob, when set, runs on each cluster after the modules the run delivers there verify
	// (verify.check_job; see checkJobFor). Delivering directly only.
	CheckJob *delivery.CheckJob
	// AdoptUnrecorded is `adopt = true` written in the configuration: each module's run takes
	// over the module's objects on a cluster whose records of it are gone, instead of holding
	// that cluster back (delivery.Spec.AdoptUnrecorded).
	AdoptUnrecorded bool
	// FollowJoins, when set, keeps the assignment's bridge for joiners (bridge.go).
	FollowJoins *FollowJoins
}

// ModuleKey is the records key of one module of the assignment. Assignment and module names
// are DNS labels, so the '.' cannot be ambiguous.
func (s Spec) ModuleKey(module string) records.Key {
	return records.Key{Kind: ModuleKind, Namespace: s.Key.Namespace, Name: s.Key.Name + "." + module}
}

// moduleSpec is what delivery needs to roll one module out. Its canaries still go first, but
// delivery does not refuse a gap in them: the assignment checks its canaries itself, over every
// cluster it picks (CanaryGaps), where a module's run sees only the clusters it changes, so a
// canary that has the module already would look missing to it.
func (s Spec) moduleSpec(m Module) delivery.Spec {
	policy := s.Policy
	policy.CanaryOptional = true
	return delivery.Spec{
		Key: s.ModuleKey(m.Name), ClusterNamespace: s.ClusterNamespace, RecordNamespace: s.RecordNamespace,
		Objects: m.Objects, Revision: m.Revision, Policy: policy, Ignore: s.Ignore, Redact: m.Redact,
		ForceConflicts: s.ForceConflicts, Retry: s.Retry, Values: s.Values, Rendered: m.Rendered,
		Health: s.Health, ClusterGates: s.ClusterGates, GatePolicy: s.GatePolicy, Kustomize: s.kustomize(m), Preview: s.Preview,
		AdoptUnrecorded: s.AdoptUnrecorded,
	}
}

// kustomize is how m's Kustomizations behave when the assignment delivers through Flux: each
// waits for those of the modules m depends on, on the same cluster (Flux's dependsOn), so that
// Flux keeps the order between applies too; with ApplyOnce, Flux creates m's objects once and
// never re-applies them.
func (s Spec) kustomize(m Module) delivery.FluxKustomize {
	k := delivery.FluxKustomize{ApplyOnce: s.Mode == ApplyOnce}
	for _, d := range m.DependsOn {
		k.DependsOn = append(k.DependsOn, s.ModuleKey(d))
	}
	return k
}

// Module returns the configured module called name.
func (s Spec) Module(name string) (Module, bool) {
	for _, m := range s.Modules {
		if m.Name == name {
			return m, true
		}
	}
	return Module{}, false
}

// Order returns modules so that each follows every module it depends on, keeping the
// configured order otherwise. It refuses duplicate names, unknown or self dependencies and
// cycles, naming them.
func Order(modules []Module) ([]Module, error) {
	index := map[string]int{}
	var problems []string
	for i, m := range modules {
		if _, dup := index[m.Name]; dup {
			problems = append(problems, fmt.Sprintf("module name %q is used more than once", m.Name))
			continue
		}
		index[m.Name] = i
	}
	for _, m := range modules {
		for _, d := range m.DependsOn {
			switch _, ok := index[d]; {
			case d == m.Name:
				problems = append(problems, fmt.Sprintf("module %q depends on itself", m.Name))
			case !ok:
				problems = append(problems, fmt.Sprintf("module %q depends on %q, which is not a module of this assignment", m.Name, d))
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	// Kahn's algorithm, always taking the first ready module in configured order.
	done := map[string]bool{}
	var out []Module
	for len(out) < len(modules) {
		progressed := false
		for _, m := range modules {
			if done[m.Name] {
				continue
			}
			ready := true
			for _, d := range m.DependsOn {
				ready = ready && done[d]
			}
			if ready {
				done[m.Name] = true
				out = append(out, m)
				progressed = true
				break
			}
		}
		if !progressed {
			return nil, fmt.Errorf("depends_on has a cycle: %s", strings.Join(cycle(modules, done), " → "))
		}
	}
	return out, nil
}

// cycle finds one dependency cycle among the modules not done.
func cycle(modules []Module, done map[string]bool) []string {
	deps := map[string][]string{}
	var start string
	for _, m := range modules {
		if !done[m.Name] {
			deps[m.Name] = m.DependsOn
			if start == "" {
				start = m.Name
			}
		}
	}
	seen := map[string]int{}
	var path []string
	for n := start; ; {
		if i, ok := seen[n]; ok {
			return append(path[i:], n)
		}
		seen[n] = len(path)
		path = append(path, n)
		next := ""
		for _, d := range deps[n] {
			if !done[d] {
				next = d
				break
			}
		}
		if next == "" {
			return path
		}
		n = next
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// withDependencies is m's objects plus those of every module it depends on, transitively, as
// objectsOf gives each module's (its template, or what it renders for one cluster).
func withDependencies(spec Spec, m Module, objectsOf func(Module) []*unstructured.Unstructured) *manifest.Set {
	seen := map[string]bool{}
	set := &manifest.Set{}
	var add func(Module)
	add = func(m Module) {
		if seen[m.Name] {
			return
		}
		seen[m.Name] = true
		for _, d := range m.DependsOn {
			if dm, ok := spec.Module(d); ok {
				add(dm)
			}
		}
		set.Objects = append(set.Objects, objectsOf(m)...)
	}
	add(m)
	return set
}
