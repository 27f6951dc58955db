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

// Observation is what the clusters and the records say about one assignment.
type Observation struct {
	// Eligible are the picked clusters that can be changed now, sorted.
	Eligible []string
	// Skipped holds the picked clusters that cannot be changed now, with the reason.
	Skipped map[string]string
	// Clusters are the picked Clusters as the fleet read them: their name, labels, annotations
	// and topology variables give each its values (Spec.Render).
	Clusters []fleet.Cluster
	// Bindings are the recorded bindings, by cluster (picked or not).
	Bindings map[string][]records.ModuleBinding
	// Modules is each configured module's delivery observation.
	Modules map[string]*delivery.Observation
	// Leaving are clusters with bindings that exist but are no longer picked; Gone, clusters
	// with bindings whose Cluster object is deleted.
	Leaving, Gone []string
}

// Observe reads the assignment's bindings and each module's records on the picked clusters;
// with drift, whether the objects of each module's current revision still match and, with
// values, whether it renders for each cluster what the cluster's record holds (a label it takes
// a value from changed: delivery.StateValuesChanged). Both only in Reconcile mode: with
// ApplyOnce a cluster keeps what it got.
func Observe(ctx context.Context, svc *delivery.Service, q fleet.Query, spec Spec, drift bool) (*Observation, error) {
	return observe(ctx, svc, q, spec, drift)
}

func observe(ctx context.Context, svc deliverer, q fleet.Query, spec Spec, drift bool) (*Observation, error) {
	bindings, err := records.NewBindingStore(svc.ManagementClient(), spec.RecordNamespace).List(ctx, spec.Key)
	if err != nil {
		return nil, err
	}
	obs := &Observation{Bindings: bindings, Modules: map[string]*delivery.Observation{}, Skipped: map[string]string{}}
	var picked map[string]bool
	drift = drift && spec.Mode == Reconcile
	for _, m := range spec.Modules {
		var o *delivery.Observation
		if drift {
			// The template is the module's public half outside plan and apply (the sensitive half
			// is write-only): delivery compares only the objects it renders (with values), and
			// checks a cluster whose records of the module are gone for its objects
			// (delivery.StateRecordsMissing).
			o, err = svc.ObserveRendered(ctx, q, spec.ModuleKey(m.Name), spec.RecordNamespace,
				delivery.Rendering{Revision: m.Revision, Template: m.Objects, Values: spec.Values}, spec.Ignore...)
		} else {
			o, err = svc.Observe(ctx, q, spec.ModuleKey(m.Name), spec.RecordNamespace, drift, spec.Ignore...)
		}
		if err != nil {
			return nil, err
		}
		obs.Modules[m.Name] = o
		if picked == nil {
			picked = map[string]bool{}
			for _, c := range o.Discovery.Clusters {
				picked[c.Name] = true
			}
			obs.Clusters = o.Discovery.Clusters
		}
		for name, reason := range o.Skipped {
			obs.Skipped[name] = reason
		}
	}
	if picked == nil { // no modules: discover anyway for join/leave
		found, err := svc.Discover(ctx, q)
		if err != nil {
			return nil, err
		}
		picked = map[string]bool{}
		obs.Clusters = found.Clusters
		for _, c := range found.Clusters {
			picked[c.Name] = true
			if !c.Eligible() {
				obs.Skipped[c.Name] = c.SkipReason
			}
		}
	}
	for _, name := range sortedNames(picked) {
		if _, skipped := obs.Skipped[name]; !skipped {
			obs.Eligible = append(obs.Eligible, name)
		}
	}
	var unpicked []string
	for _, name := range sortedNames(bindings) {
		if !picked[name] {
			unpicked = append(unpicked, name)
		}
	}
	if len(unpicked) > 0 {
		found, err := svc.Discover(ctx, fleet.Query{Namespace: q.Namespace, Names: unpicked})
		if err != nil {
			return nil, err
		}
		obs.Gone = found.Missing
		for _, c := range found.Clusters {
			obs.Leaving = append(obs.Leaving, c.Name)
		}
	}
	return obs, nil
}

// Binding returns the recorded binding of module on cluster.
func (o *Observation) Binding(cluster, module string) (records.ModuleBinding, bool) {
	for _, b := range o.Bindings[cluster] {
		if b.Module == module {
			return b, true
		}
	}
	return records.ModuleBinding{}, false
}

// moduleState is what module's observation says of cluster (the zero state when it has none).
func (o *Observation) moduleState(module, cluster string) delivery.ClusterState {
	if mo := o.Modules[module]; mo != nil {
		return mo.Clusters[cluster]
	}
	return delivery.ClusterState{}
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
		Held: map[string]map[string]string{}, Removed: map[string][]string{}, Leaving: obs.Leaving, Gone: obs.Gone}
	for _, cluster := range obs.Eligible {
		var planned []PlannedBinding
		for _, m := range spec.Modules {
			b, bound := obs.Binding(cluster, m.Name)
			st := obs.moduleState(m.Name, cluster)
			keep := false
			switch spec.Mode {
			case ApplyOnce:
				keep = bound && b.Result == records.BindingApplied
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
