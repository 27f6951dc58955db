package owners

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// A managed topology is a Cluster built from a ClusterClass (spec.topology). Its topology
// controller owns the version and template references of the control plane and the
// MachineDeployments it made, so an update of such a cluster writes the Cluster's
// spec.topology.version and nothing else; the topology controller then upgrades the control
// plane, and the MachineDeployments once the control plane is done, and Cluster API decides per
// machine whether it updates it in place or replaces it, exactly as for an owner written
// directly. The preview therefore plans the control plane and every MachineDeployment the
// topology manages as if each got the version (what the topology controller writes), in that
// order, asking the extensions what Cluster API will ask.

var clusterClassGVK = schema.GroupVersionKind{Group: capiGroup, Version: capiVersion, Kind: "ClusterClass"}

// topologyReconciledCondition is the Cluster's condition the topology controller reports on
// (clusterv1.ClusterTopologyReconciledCondition).
const topologyReconciledCondition = "TopologyReconciled"

// Topology is the Cluster of a managed topology a plan upgrades.
type Topology struct {
	// Cluster is the Cluster as the plan read it (its resourceVersion guards the write).
	Cluster *unstructured.Unstructured
	// Class is the name of its ClusterClass.
	Class string
	// From is spec.topology.version as read; To the version the change writes.
	From, To string
}

// Name is "Cluster ns/name".
func (t *Topology) Name() string {
	return fmt.Sprintf("Cluster %s/%s", t.Cluster.GetNamespace(), t.Cluster.GetName())
}

// managedTopology is the Cluster's spec.topology, nil when the Cluster has none.
func managedTopology(cluster *unstructured.Unstructured) map[string]any {
	t, _, _ := unstructured.NestedMap(cluster.Object, "spec", "topology")
	if len(t) == 0 {
		return nil
	}
	return t
}

// className is the topology's ClusterClass and the namespace it lives in (the Cluster's unless
// classRef says otherwise).
func className(cluster *unstructured.Unstructured, topology map[string]any) (namespace, name string) {
	name, _, _ = unstructured.NestedString(topology, "classRef", "name")
	namespace, _, _ = unstructured.NestedString(topology, "classRef", "namespace")
	if name == "" {
		name, _, _ = unstructured.NestedString(topology, "class") // v1beta1 Clusters
	}
	if namespace == "" {
		namespace = cluster.GetNamespace()
	}
	return namespace, name
}

// topologySelections are the owners an upgrade of a managed topology changes, in the order the
// topology controller upgrades them: the control plane, then every MachineDeployment the
// topology made (label topologyOwnedLabel), by name. MachineDeployments the topology did not
// make and mds picks follow, written directly as in any other cluster.
func (p *Planner) topologySelections(ctx context.Context, cluster *unstructured.Unstructured, cpName string, mds Owners) ([]Selection, error) {
	ns, name := cluster.GetNamespace(), cluster.GetName()
	sels := []Selection{{Namespace: ns, Cluster: name, ControlPlane: cpName, Topology: true}}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(machineDeploymentGVK.GroupVersion().WithKind("MachineDeploymentList"))
	if err := p.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterNameLabel: name}); err != nil {
		return nil, usererr.Wrap(err, "Cannot List MachineDeployments", fmt.Sprintf("Listing the MachineDeployments of cluster %s/%s failed.", ns, name))
	}
	slices.SortFunc(list.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	var direct []Selection
	for _, md := range list.Items {
		if cn, _, _ := unstructured.NestedString(md.Object, "spec", "clusterName"); cn != name || md.GetDeletionTimestamp() != nil {
			continue
		}
		sel := Selection{Namespace: ns, Cluster: name, MachineDeployment: md.GetName()}
		_, owned := md.GetLabels()[topologyOwnedLabel]
		switch {
		case owned:
			sel.Topology = true
			sels = append(sels, sel)
		case mds.MachineDeployments != nil && mds.MachineDeployments.Matches(labels.Set(md.GetLabels())):
			direct = append(direct, sel)
		}
	}
	return append(sels, direct...), nil
}

// readTopology reads the Cluster and its ClusterClass and checks that change can go through
// spec.topology: a version and nothing else (templates change through the ClusterClass), one
// the ClusterClass allows, no downgrade.
func (p *Planner) readTopology(ctx context.Context, namespace, cluster string, change inplace.Change) (*Topology, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
		return nil, usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", namespace, cluster))
	}
	topology := managedTopology(cl)
	if topology == nil {
		return nil, fmt.Errorf("cluster %s/%s has no spec.topology", namespace, cluster)
	}
	t := &Topology{Cluster: cl, To: change.Version}
	t.From, _, _ = unstructured.NestedString(topology, "version")
	classNS, class := className(cl, topology)
	t.Class = class
	if len(change.MachineSpec) > 0 || len(change.InfrastructureMachineSpec) > 0 || len(change.BootstrapConfigSpec) > 0 {
		return nil, usererr.New("Template Change Through The ClusterClass",
			fmt.Sprintf("Cluster %s/%s is built from ClusterClass %q (spec.topology): its topology controller makes the control plane's and the MachineDeployments' templates "+
				"from the ClusterClass and puts back any other. Change the templates (or the variables its patches read) in the ClusterClass; "+
				"this resource upgrades such a cluster by `version` (spec.topology.version) only: drop machine_spec_patch, infrastructure_machine_spec_patch and bootstrap_config_spec_patch.",
				namespace, cluster, class))
	}
	if change.Version == "" {
		return nil, usererr.New("No Version For A Managed Topology",
			fmt.Sprintf("Cluster %s/%s is built from ClusterClass %q (spec.topology) and is upgraded through spec.topology.version: set `version`.", namespace, cluster, class))
	}
	cc := &unstructured.Unstructured{}
	cc.SetGroupVersionKind(clusterClassGVK)
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: classNS, Name: class}, cc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usererr.New("ClusterClass Not Found", fmt.Sprintf("Cluster %s/%s names ClusterClass %s/%s (spec.topology.classRef), which does not exist.", namespace, cluster, classNS, class))
		}
		return nil, usererr.Wrap(err, "Cannot Read ClusterClass", fmt.Sprintf("Reading ClusterClass %s/%s failed.", classNS, class))
	}
	if from, err := version.ParseSemantic(t.From); err == nil {
		if to, err := version.ParseSemantic(change.Version); err == nil && to.LessThan(from) {
			return nil, usererr.New("Topology Downgrade",
				fmt.Sprintf("Cluster %s/%s runs %s (spec.topology.version); Cluster API does not downgrade a managed topology to %s.", namespace, cluster, t.From, change.Version))
		}
	}
	if allowed, _, _ := unstructured.NestedStringSlice(cc.Object, "spec", "kubernetesVersions"); len(allowed) > 0 && !slices.Contains(allowed, change.Version) {
		return nil, usererr.New("Version Not In The ClusterClass",
			fmt.Sprintf("ClusterClass %s/%s allows the Kubernetes versions %s (spec.kubernetesVersions); %s is not one of them, and Cluster API would refuse it for Cluster %s/%s.",
				classNS, class, strings.Join(allowed, ", "), change.Version, namespace, cluster))
	}
	return t, nil
}

// topologyNote says what the preview of a managed topology cannot see.
func topologyNote(t *Topology) string {
	return fmt.Sprintf("%s is upgraded through spec.topology.version (ClusterClass %q): the topology controller upgrades the control plane, then the MachineDeployments it manages; "+
		"the preview assumes the ClusterClass's patches change nothing but the version", t.Name(), t.Class)
}

// splitTopology parts cp's owners into those written through the Cluster's topology (first) and
// those written directly.
func splitTopology(cp *ClusterPlan) (viaTopology, direct []*Result) {
	for _, r := range cp.Owners {
		if r.Request.Selection.Topology {
			viaTopology = append(viaTopology, r)
		} else {
			direct = append(direct, r)
		}
	}
	return viaTopology, direct
}

// executeTopology writes the version to the Cluster's spec.topology (under the resourceVersion
// the plan read) and waits until the topology controller and Cluster API have brought the
// control plane and every MachineDeployment of results up to date. A blocked plan is refused
// before anything is written.
func (p *Planner) executeTopology(ctx context.Context, t *Topology, results []*Result, req ExecuteRequest) (map[string]string, error) {
	status := map[string]string{}
	for _, res := range results {
		if err := res.Plan.Err(); err != nil {
			return status, engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, inplace.BlockedSummary, inplace.BlockedLead+"."))
		}
		for _, m := range res.Machines {
			status[m.Plan.Machine] = StatusNotStarted
		}
	}
	if len(results) == 0 {
		return status, nil
	}
	if req.Holder != "" {
		var keys []records.Key
		for _, res := range results {
			keys = append(keys, LeaseKeys(res.Request.Selection, res.Machines)...)
		}
		slices.SortFunc(keys, func(a, b records.Key) int { return strings.Compare(a.String(), b.String()) })
		runCtx, release, err := p.holdLeases(ctx, slices.Compact(keys), req)
		if err != nil {
			return status, err
		}
		defer release()
		ctx = runCtx
	}
	revision := results[0].Revision
	if t.From != t.To || t.Cluster.GetAnnotations()[AnnotationRevision] != revision {
		if err := p.writeTopology(ctx, t, revision); err != nil {
			return status, err
		}
		req.Logf(fmt.Sprintf("wrote spec.topology.version %s to %s (revision %s); the topology controller rolls it out", t.To, t.Name(), revision), nil)
	}
	st, err := p.waitTopology(ctx, t, results, req)
	maps.Copy(status, st)
	return status, err
}

// writeTopology merge-patches spec.topology.version and records the revision on the Cluster.
func (p *Planner) writeTopology(ctx context.Context, t *Topology, revision string) error {
	raw, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": t.Cluster.GetResourceVersion(), "annotations": map[string]any{AnnotationRevision: revision}},
		"spec":     map[string]any{"topology": map[string]any{"version": t.To}},
	})
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	u.SetNamespace(t.Cluster.GetNamespace())
	u.SetName(t.Cluster.GetName())
	if err := records.Fenced(ctx); err != nil {
		return err // the Lease may be another apply's now: write nothing
	}
	if err := p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, raw)); err != nil {
		if apierrors.IsConflict(err) {
			return engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, "Cluster Changed Since The Plan", t.Name()+" was changed after the plan read it; plan again."))
		}
		return usererr.Wrap(err, "Cannot Write Cluster", "Writing spec.topology.version to "+t.Name()+" failed.")
	}
	return nil
}

// waitTopology polls the Cluster, its owners, their machines and Nodes until the topology is
// reconciled at the version and every machine is up to date (see topologyProblems and lookAt),
// or VerifyTimeout passes; the error then names the Cluster and what the last look found wrong.
func (p *Planner) waitTopology(ctx context.Context, t *Topology, results []*Result, req ExecuteRequest) (map[string]string, error) {
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	ctx, cancel := context.WithTimeout(ctx, req.VerifyTimeout)
	defer cancel()
	var lines []string
	var status map[string]string
	for {
		problems, st, err := p.lookAtTopology(ctx, t, results)
		if err == nil {
			lines, status = problems, st
			if len(problems) == 0 {
				return status, nil
			}
		} else {
			lines = append(slices.Clone(lines), err.Error())
		}
		if sleepErr := req.Clock.Sleep(ctx, 2*time.Second); sleepErr != nil {
			for name, s := range status {
				if s != StatusReplaced && s != StatusUnchanged {
					status[name] = StatusFailed
				}
			}
			return status, usererr.Wrap(notVerified(strings.Join(lines, "\n")), "In-Place Update Not Verified",
				fmt.Sprintf("%s: spec.topology.version is %s, but the topology controller and Cluster API did not bring the control plane and every MachineDeployment "+
					"up to date within %s (%v). They go on with it; look at what is named below (TopologyReconciled says what the topology controller waits for), then apply again to verify.",
					t.Name(), t.To, req.VerifyTimeout, context.Cause(ctx)))
		}
	}
}

// lookAtTopology is one look at the Cluster (topologyProblems) and at each owner and its
// machines (lookAt).
func (p *Planner) lookAtTopology(ctx context.Context, t *Topology, results []*Result) ([]string, map[string]string, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(t.Cluster), cl); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	problems := topologyProblems(cl, t)
	status := map[string]string{}
	for _, res := range results {
		l, err := p.lookAt(ctx, res)
		if err != nil {
			return nil, nil, err
		}
		problems = append(problems, l.problems...)
		maps.Copy(status, l.status(res))
	}
	return problems, status, nil
}

// topologyProblems lists why the Cluster's topology is not done: the version changed by someone
// else, the Cluster's generation not observed, TopologyReconciled not True (its reason says what
// the topology controller waits for: ClusterUpgrading while it upgrades).
func topologyProblems(cl *unstructured.Unstructured, t *Topology) []string {
	var out []string
	name := t.Name()
	if v, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "version"); v != t.To {
		out = append(out, fmt.Sprintf("%s: spec.topology.version is %s, want %s (changed since this apply wrote it)", name, v, t.To))
	}
	if observed, _, _ := unstructured.NestedInt64(cl.Object, "status", "observedGeneration"); observed < cl.GetGeneration() {
		out = append(out, fmt.Sprintf("%s: observedGeneration %d behind generation %d", name, observed, cl.GetGeneration()))
	}
	c := condition(cl, topologyReconciledCondition)
	switch {
	case c == nil:
		out = append(out, fmt.Sprintf("%s: no %s condition: the topology controller has not reconciled it (is Cluster API's ClusterTopology feature gate on?)", name, topologyReconciledCondition))
	case c["status"] != "True":
		out = append(out, fmt.Sprintf("%s: %s %v (%v): %v", name, topologyReconciledCondition, c["status"], c["reason"], c["message"]))
	case observedGen(c) >= 0 && observedGen(c) < cl.GetGeneration():
		out = append(out, fmt.Sprintf("%s: %s is about generation %d, not %d", name, topologyReconciledCondition, observedGen(c), cl.GetGeneration()))
	}
	return out
}

// observedGen is a condition's observedGeneration, -1 when it has none.
func observedGen(c map[string]any) int64 {
	switch v := c["observedGeneration"].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return -1
}

// topologyRevision is the revision recorded on the Cluster of sel, for an owner written through
// the topology.
func (p *Planner) topologyRevision(ctx context.Context, sel Selection) (string, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: sel.Cluster}, cl); err != nil {
		return "", usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", sel.Namespace, sel.Cluster))
	}
	return cl.GetAnnotations()[AnnotationRevision], nil
}

// topologyOwnerProblems says whether the topology controller has written the version to an
// owner it manages yet: it upgrades the control plane first and a MachineDeployment only once
// the control plane is done.
func topologyOwnerProblems(owner *unstructured.Unstructured, o *Owner, want string) []string {
	field := []string{"spec", "version"}
	if o.Kind == KindMachineDeployment {
		field = []string{"spec", "template", "spec", "version"}
	}
	if v, _, _ := unstructured.NestedString(owner.Object, field...); want != "" && v != want {
		return []string{fmt.Sprintf("%s: %s is %s, want %s: the topology controller has not upgraded it yet (the control plane first, then the MachineDeployments)",
			o.Name(), strings.Join(field, "."), v, want)}
	}
	return nil
}
