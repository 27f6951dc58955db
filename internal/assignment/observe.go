package assignment

import (
	"context"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
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
