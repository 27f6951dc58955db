package owners

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Pick picks, in each cluster of a fleet update, the owners the change is written to: the
// cluster's control plane and/or its MachineDeployments by label. Names are not used: they
// differ from cluster to cluster (ClusterClass generates them).
type Pick struct {
	// ControlPlane: the cluster's control plane (the KubeadmControlPlane its
	// spec.controlPlaneRef names), updated and verified before its MachineDeployments, as
	// Kubernetes' version skew policy wants.
	ControlPlane bool
	// MachineDeployments, when not nil, picks the cluster's MachineDeployments whose labels it
	// matches (labels.Everything() for all of them).
	MachineDeployments labels.Selector
}

// FleetRequest is one in-place update over several clusters.
type FleetRequest struct {
	Namespace string
	// Clusters are the names of the clusters to plan (the eligible ones), in any order.
	Clusters []string
	Owners   Pick
	Change   inplace.Change
	Fallback inplace.Fallback
	// Endpoints are the extensions to ask; nil means those of the management cluster's
	// ExtensionConfig objects.
	Endpoints []extension.Endpoint
	// SkipUnmanaged: with topology variables and the control plane selected, a Cluster
	// without a managed topology (no spec.topology) is skipped (SkipNoTopology), not refused.
	// A selector may pick such clusters among the ClusterClass-built ones; a cluster named is
	// refused (errVariablesWithoutTopology).
	SkipUnmanaged bool
}

// SkipNoTopology is the skip reason of a Cluster without a managed topology in a fleet update
// with topology variables (FleetRequest.SkipUnmanaged).
const SkipNoTopology = "no managed topology: topology_variables need a ClusterClass-built Cluster"

// ClusterPlan is the plan of one cluster: one PlanResult per owner, the control plane first, then
// the MachineDeployments by name. SkipReason, when set, says why the cluster cannot be updated
// (no owner selected there, an owner paused); it then has no Owners.
type ClusterPlan struct {
	Cluster    string
	SkipReason string
	Owners     []*PlanResult
	// Topology, for a Cluster built from a ClusterClass whose control plane is selected, is the
	// Cluster the version is written to; the owners it manages (their Selection.Topology) come
	// first in Owners and are previewed, not written.
	Topology *Topology
}

// Machines are the plans of every machine of the cluster, owner by owner.
func (c *ClusterPlan) Machines() []inplace.MachinePlan {
	var out []inplace.MachinePlan
	for _, r := range c.Owners {
		out = append(out, r.Plan.Machines...)
	}
	return out
}

// Current reports whether the cluster is done with revision: every owner records it, no
// machine still differs from what the change wants, and Cluster API is done with every machine
// (UpToDate, not updating). A cluster an earlier apply wrote but did not see through is not
// current: the next apply verifies it again.
func (c *ClusterPlan) Current(revision string) bool {
	if !c.Recorded(revision) || c.Changes() {
		return false
	}
	for _, r := range c.Owners {
		for _, m := range r.Machines {
			if machineProblem(m.Current.Machine, r.Request.Change.Version) != "" {
				return false
			}
		}
	}
	return true
}

// Recorded reports whether every owner carries revision in its AnnotationRevision (the change
// was written to all of them, perhaps not yet carried out).
func (c *ClusterPlan) Recorded(revision string) bool {
	if len(c.Owners) == 0 {
		return false
	}
	for _, r := range c.Owners {
		recorded := r.Owner.Current.GetAnnotations()[AnnotationRevision]
		if r.Request.Selection.Topology && c.Topology != nil {
			recorded = c.Topology.Cluster.GetAnnotations()[AnnotationRevision]
		}
		if recorded != revision {
			return false
		}
	}
	return true
}

// Changes reports whether a machine of the cluster differs from what the change wants, or a
// topology variable of its Cluster does.
func (c *ClusterPlan) Changes() bool {
	if c.Topology != nil && len(c.Topology.Variables) > 0 {
		return true
	}
	for _, m := range c.Machines() {
		if m.Strategy != inplace.StrategyUnchanged {
			return true
		}
	}
	return false
}

// FleetPlan is the plan of every cluster of a FleetRequest, sorted by cluster name.
type FleetPlan struct {
	Revision string
	Clusters []*ClusterPlan
	// Notes are things worth a warning, once each.
	Notes []string
}

// Cluster returns the plan of one cluster, nil when it is not in the plan.
func (f *FleetPlan) Cluster(name string) *ClusterPlan {
	i, ok := slices.BinarySearchFunc(f.Clusters, name, func(c *ClusterPlan, n string) int { return strings.Compare(c.Cluster, n) })
	if !ok {
		return nil
	}
	return f.Clusters[i]
}

// Err is the error of a plan that must be refused: machines blocked (fallback "none") in any
// cluster, each named with its cluster.
func (f *FleetPlan) Err() error {
	var lines []string
	for _, c := range f.Clusters {
		for _, r := range c.Owners {
			if err := r.Plan.Err(); err != nil {
				for _, l := range strings.Split(err.Error(), "\n") {
					lines = append(lines, "cluster "+c.Cluster+": "+l)
				}
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New(strings.Join(lines, "\n"))
}

// PlanFleet plans req cluster by cluster, at most the provider's max_parallel_clusters
// (Settings.Parallelism) at a time. The extensions are found and asked for their Discovery
// answer once for the whole fleet. An error reading one cluster's owners or machines fails the
// plan, naming the cluster; a cluster where the change cannot go (no owner matches, an owner
// paused, a MachineDeployment with the OnDelete strategy) is skipped with the reason, as the
// rollout skips clusters that are not ready. Like Plan (one owner), it is not an entry point
// but a step of fleetupdate.Service's Plan and Apply, its only caller, so it keeps its name.
func (p *Planner) PlanFleet(ctx context.Context, req FleetRequest) (*FleetPlan, error) {
	if err := req.Change.Validate(); err != nil {
		return nil, usererr.Wrap(err, "Invalid Spec Patch", "Each spec patch must be a JSON object: a JSON merge patch (RFC 7386) of the object's spec.")
	}
	if err := req.Change.ValidateVariables(); err != nil {
		return nil, usererr.Wrap(err, "Invalid Topology Variable", "Each topology variable's value must be JSON, e.g. jsonencode(\"eu-west\") or jsonencode({ replicas = 3 }).")
	}
	out := &FleetPlan{Revision: Revision(req.Change)}
	endpoints := req.Endpoints
	if endpoints == nil {
		var notes []string
		var err error
		if endpoints, notes, err = fromExtensionConfigs(ctx, p.Client, p.RESTConfig, req.Namespace); err != nil {
			return nil, err
		}
		out.Notes = append(out.Notes, notes...)
	}
	exts := &extensionSet{endpoints: endpoints, opts: p.Options, ready: p.serviceReady}
	gates := &gateSet{}
	names := slices.Clone(req.Clusters)
	slices.Sort(names)
	names = slices.Compact(names)
	out.Clusters = make([]*ClusterPlan, len(names))
	errs := make([]error, len(names))
	var g errgroup.Group
	g.SetLimit(p.Settings.WithDefaults().Parallelism)
	for i, name := range names {
		g.Go(func() error {
			out.Clusters[i], errs[i] = p.planCluster(ctx, req, name, exts, gates)
			return nil // every cluster is planned; the errors are joined below
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if n := variablesNote(out.Clusters); n != "" {
		out.Notes = append(out.Notes, n)
	}
	seen := map[string]bool{}
	for _, c := range out.Clusters {
		for _, r := range c.Owners {
			for _, n := range r.Notes {
				if !seen[n] {
					seen[n] = true
					out.Notes = append(out.Notes, n)
				}
			}
		}
	}
	return out, nil
}

// planCluster finds the cluster's owners and plans each.
func (p *Planner) planCluster(ctx context.Context, req FleetRequest, cluster string, exts *extensionSet, gates *gateSet) (*ClusterPlan, error) {
	cp := &ClusterPlan{Cluster: cluster}
	sels, skip, err := (&Reader{Client: p.Client}).ClusterOwners(ctx, req.Namespace, cluster, req.Owners)
	if err != nil {
		return nil, err
	}
	if skip != "" {
		cp.SkipReason = skip
		return cp, nil
	}
	switch {
	case len(sels) > 0 && sels[0].Topology:
		if cp.Topology, err = p.readTopology(ctx, req.Namespace, cluster, req.Change); err != nil {
			return nil, fmt.Errorf("cluster %s/%s: %w", req.Namespace, cluster, err)
		}
	case len(req.Change.TopologyVariables) > 0 && req.Owners.ControlPlane && req.SkipUnmanaged:
		// The control plane is selected and ClusterOwners found no spec.topology.
		cp.SkipReason = SkipNoTopology
		return cp, nil
	case len(req.Change.TopologyVariables) > 0:
		return nil, errVariablesWithoutTopology(req.Namespace, cluster)
	}
	for _, sel := range sels {
		res, err := p.plan(ctx, Request{Selection: sel, Change: req.Change, Fallback: req.Fallback, Endpoints: exts.endpoints}, exts, gates)
		if err != nil {
			if e, ok := usererr.As(err); ok && errors.Is(err, ErrClusterSkippable) {
				return &ClusterPlan{Cluster: cluster, SkipReason: e.Detail}, nil
			}
			return nil, fmt.Errorf("cluster %s/%s: %w", req.Namespace, cluster, err)
		}
		if sel.Topology && sel.ControlPlane != "" {
			res.Notes = append(res.Notes, topologyNote(cp.Topology))
		}
		cp.Owners = append(cp.Owners, res)
	}
	return cp, nil
}

// errVariablesWithoutTopology refuses topology variables for an owner written directly: only a
// Cluster built from a ClusterClass has them, written with its control plane's upgrade.
func errVariablesWithoutTopology(namespace, cluster string) error {
	return usererr.New("Topology Variables Without A Managed Topology",
		fmt.Sprintf("topology_variables are written to the spec.topology.variables of a Cluster built from a ClusterClass, with `update_control_plane = true` "+
			"(and `cluster`, `names` or `selector`); Cluster %s/%s is not picked that way here (it has no spec.topology, or its control plane is not selected). "+
			"Drop topology_variables, or pick the cluster's topology.", namespace, cluster))
}

// extensionSet connects to the extensions once, on first need, for every plan that shares it.
type extensionSet struct {
	endpoints []extension.Endpoint
	opts      extension.Options
	ready     func(context.Context, extension.Endpoint) error
	once      sync.Once
	exts      []*Extension
	err       error
}

func (s *extensionSet) get(ctx context.Context) ([]*Extension, error) {
	s.once.Do(func() { s.exts, s.err = connect(ctx, s.endpoints, s.opts, s.ready) })
	return s.exts, s.err
}
