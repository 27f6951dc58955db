package owners

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Reader reads the owners of a management cluster, their machines and the machines' Nodes as
// they are now, calling no extension and writing nothing: for a refresh (Observe, VariableDrift),
// to find a cluster's owners (ClusterOwners), and for the waits of an update (LookAt,
// LookAtTopology).
type Reader struct {
	// Client reads the management cluster.
	Client client.Client
	// Workload returns a client for a workload cluster, to read its Nodes; nil leaves the Nodes
	// unread.
	Workload func(ctx context.Context, namespace, cluster string) (client.Client, error)
}

// Observe reads the selected owner, its machines and, for those whose specs are the desired
// ones, their Nodes in the workload cluster. It calls no extension and writes nothing. A
// workload cluster that cannot be read is a note, not an error.
func (r *Reader) Observe(ctx context.Context, sel Selection, change inplace.Change) (*Observation, error) {
	if err := change.Validate(); err != nil {
		return nil, usererr.Wrap(err, "Invalid Spec Patch", "Each spec patch must be a JSON object: a JSON merge patch (RFC 7386) of the object's spec.")
	}
	out := &Observation{}
	owner := &unstructured.Unstructured{}
	name := sel.MachineDeployment
	owner.SetGroupVersionKind(machineDeploymentGVK)
	if sel.ControlPlane != "" {
		owner.SetGroupVersionKind(kcpGVK)
		name = sel.ControlPlane
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: name}, owner); err != nil {
		if apierrors.IsNotFound(err) {
			out.OwnerGone = true
			return out, nil
		}
		return nil, usererr.Wrap(err, "Cannot Read "+owner.GetKind(), fmt.Sprintf("Reading %s %s/%s failed.", owner.GetKind(), sel.Namespace, name))
	}
	out.OwnerRevision = owner.GetAnnotations()[AnnotationRevision]
	if sel.Topology {
		// Written through the Cluster's topology: the Cluster carries the revision.
		rev, err := r.topologyRevision(ctx, sel)
		if err != nil {
			return nil, err
		}
		out.OwnerRevision = rev
	}
	objs, err := readMachines(ctx, r.Client, sel)
	if err != nil {
		return nil, err
	}
	var wc client.Client
	for _, o := range objs {
		ob := Observed{Machine: o.Machine.GetName()}
		ob.Node, _, _ = unstructured.NestedString(o.Machine.Object, "status", "nodeRef", "name")
		ob.Version, _, _ = unstructured.NestedString(o.Machine.Object, "spec", "version")
		des, err := inplace.Desired(o, change)
		if err != nil {
			return nil, usererr.Wrap(err, "Change Does Not Apply", fmt.Sprintf("The change cannot be applied to Machine %s/%s.", o.Machine.GetNamespace(), ob.Machine))
		}
		if ob.Changed, err = inplace.ChangedFields(o, des); err != nil {
			return nil, usererr.Wrap(err, "Cannot Compare Specs", fmt.Sprintf("The specs of Machine %s/%s cannot be compared with the desired ones.", o.Machine.GetNamespace(), ob.Machine))
		}
		if len(ob.Changed) == 0 {
			ob.Pending = machineProblem(o.Machine, change.Version)
		}
		if len(ob.Changed) == 0 && ob.Pending == "" && ob.Node != "" && r.Workload != nil && len(out.Notes) == 0 {
			if wc == nil {
				if wc, err = r.Workload(ctx, sel.Namespace, sel.Cluster); err != nil {
					out.Notes = append(out.Notes, fmt.Sprintf("the Nodes of cluster %s/%s were not checked: %v", sel.Namespace, sel.Cluster, err))
				}
			}
			if wc != nil {
				var node corev1.Node
				switch err := wc.Get(ctx, client.ObjectKey{Name: ob.Node}, &node); {
				case apierrors.IsNotFound(err):
					ob.NodeProblem = fmt.Sprintf("Node %s does not exist", ob.Node)
				case err != nil:
					out.Notes = append(out.Notes, fmt.Sprintf("the Nodes of cluster %s/%s were not checked: %v", sel.Namespace, sel.Cluster, err))
				default:
					if p := nodeProblem(&node, change.Version); p != nil {
						ob.NodeProblem = p.Error()
					}
				}
			}
		}
		out.Machines = append(out.Machines, ob)
	}
	return out, nil
}

// ClusterOwners lists the owners of cluster that o picks, in the order they are updated (the
// control plane first, then MachineDeployments by name). skip says why none can be: o picks
// nothing there, or the control plane is not a KubeadmControlPlane.
func (r *Reader) ClusterOwners(ctx context.Context, namespace, cluster string, o Pick) (sels []Selection, skip string, err error) {
	if o.ControlPlane {
		cl := &unstructured.Unstructured{}
		cl.SetGroupVersionKind(clusterGVK)
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
			return nil, "", usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", namespace, cluster))
		}
		kind, _, _ := unstructured.NestedString(cl.Object, "spec", "controlPlaneRef", "kind")
		name, _, _ := unstructured.NestedString(cl.Object, "spec", "controlPlaneRef", "name")
		switch {
		case name == "":
			return nil, "no control plane (spec.controlPlaneRef)", nil
		case kind != KindKubeadmControlPlane:
			return nil, fmt.Sprintf("control plane is a %s; only KubeadmControlPlane is supported", kind), nil
		case managedTopology(cl) != nil:
			// The version goes to spec.topology, and the topology controller upgrades every
			// MachineDeployment it manages after the control plane, selected or not.
			sels, err := r.topologySelections(ctx, cl, name, o)
			return sels, "", err
		}
		sels = append(sels, Selection{Namespace: namespace, Cluster: cluster, ControlPlane: name})
	}
	if o.MachineDeployments != nil {
		req, err := labels.NewRequirement(clusterNameLabel, "=", []string{cluster})
		if err != nil {
			return nil, "", usererr.Wrap(err, "Invalid Cluster Name", fmt.Sprintf("Cluster name %q cannot be a label value.", cluster))
		}
		sel := o.MachineDeployments.DeepCopySelector().Add(*req)
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(machineDeploymentGVK.GroupVersion().WithKind("MachineDeploymentList"))
		if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, "", usererr.Wrap(err, "Cannot List MachineDeployments", fmt.Sprintf("Listing the MachineDeployments of cluster %s/%s failed.", namespace, cluster))
		}
		var names []string
		for _, md := range list.Items {
			if cn, _, _ := unstructured.NestedString(md.Object, "spec", "clusterName"); cn == cluster && md.GetDeletionTimestamp() == nil {
				names = append(names, md.GetName())
			}
		}
		slices.Sort(names)
		for _, n := range names {
			sels = append(sels, Selection{Namespace: namespace, Cluster: cluster, MachineDeployment: n})
		}
	}
	if len(sels) == 0 {
		what := "no MachineDeployment matches machine_deployment_selector"
		if o.ControlPlane {
			what = "no owner selected"
		}
		return nil, what, nil
	}
	return sels, "", nil
}

// VariableDrift compares each of vars (the configured topology variables) with the value the
// Cluster's spec.topology.variables holds now, as JSON values (key order, spacing and the
// spelling of a number aside), and returns those that differ: the Cluster's value (From, ""
// when unset) and the configured one (To). A refresh calls it, so that a variable set back
// since the apply shows in the next plan as the change it needs again; the machines cannot
// show it (the ClusterClass's patches may not change them at all). A Cluster without
// spec.topology has nothing to compare (the plan skips or refuses it).
func (r *Reader) VariableDrift(ctx context.Context, namespace, cluster string, vars map[string]json.RawMessage) ([]VariableChange, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
		return nil, usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", namespace, cluster))
	}
	if managedTopology(cl) == nil {
		return nil, nil
	}
	live := map[string]any{}
	list, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "variables")
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				live[n] = m["value"]
			}
		}
	}
	var out []VariableChange
	for _, n := range slices.Sorted(maps.Keys(vars)) {
		want, err := decodeJSON(vars[n])
		if err != nil {
			return nil, usererr.Wrap(err, "Invalid Topology Variable", fmt.Sprintf("The value of topology variable %q is not JSON.", n))
		}
		now, set := live[n]
		if set && sameJSON(now, want) {
			continue
		}
		from := ""
		if set {
			from = compactJSON(now)
		}
		out = append(out, VariableChange{Name: n, From: from, To: compactJSON(want)})
	}
	return out, nil
}

// LookAt reads the owner, its machines and their Nodes and lists what is not yet as desired:
// the owner's observedGeneration behind, replicas not all up to date and available, a Machine
// not UpToDate, Updating, carrying CAPI's in-place bookkeeping, on another version or without a
// Node, a Node not Ready or on another kubelet version.
func (r *Reader) LookAt(ctx context.Context, res *PlanResult) (*Look, error) {
	o := res.Owner
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(o.Current.GroupVersionKind())
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(o.Current), owner); err != nil {
		return nil, fmt.Errorf("read %s: %w", o.Name(), err)
	}
	l := &Look{machines: map[string]string{}, moved: map[string]bool{}}
	planned := map[string]string{}
	for _, m := range res.Machines {
		planned[m.Plan.Machine] = m.Current.Machine.GetLabels()[machineSetLabel]
	}
	l.Problems = ownerProblems(owner, o.Name())
	if res.Request.Selection.Topology {
		l.Problems = append(l.Problems, topologyOwnerProblems(owner, o, res.Request.Change.Version)...)
	}
	machines, deleting, err := listMachines(ctx, r.Client, res.Request.Selection)
	if err != nil {
		return nil, err
	}
	// Counted here, not only in the owner's status, which can lag a step behind: a Machine on
	// its way out, or one not created yet, means CAPI is not done.
	if replicas, found, _ := unstructured.NestedInt64(owner.Object, "spec", "replicas"); found && (int64(len(machines)) != replicas || len(deleting) > 0) {
		l.Problems = append(l.Problems, fmt.Sprintf("%s: %d Machines (%d more being deleted: %s), want %d", o.Name(), len(machines), len(deleting), strings.Join(deleting, ", "), replicas))
	}
	want := res.Request.Change.Version
	var wc client.Client
	for _, m := range machines {
		u := m.Machine
		l.machines[u.GetName()] = string(u.GetUID())
		// A MachineDeployment's Machine kept (same UID) but moved to the MachineSet of a new
		// template was updated in place: Cluster API moves a Machine only to update it in place
		// (startMoveMachines in core/reconcilers/machineset/machineset_controller.go, Cluster API
		// v1.14.2). It tells an update the preview did not foresee (a topology variable the
		// ClusterClass's patches read) from no change.
		if was, ok := planned[u.GetName()]; ok && was != "" && u.GetLabels()[machineSetLabel] != was {
			l.moved[u.GetName()] = true
		}
		problem := machineProblem(u, want)
		node, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name")
		if problem == "" && node != "" {
			if wc == nil && r.Workload != nil {
				if wc, err = r.Workload(ctx, res.Request.Selection.Namespace, res.Request.Selection.Cluster); err != nil {
					problem = fmt.Sprintf("its Node %s cannot be checked: %v", node, err)
				}
			}
			if wc != nil {
				var n corev1.Node
				if err := wc.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
					problem = fmt.Sprintf("read Node %s: %v", node, err)
				} else if err := nodeProblem(&n, want); err != nil {
					problem = err.Error()
				}
			}
		}
		if problem != "" {
			l.Problems = append(l.Problems, fmt.Sprintf("machine %s: %s", u.GetName(), problem))
		}
	}
	slices.Sort(l.Problems)
	return l, nil
}

// LookAtTopology is one look at the Cluster (topologyProblems) and at each owner and its
// machines (LookAt).
func (r *Reader) LookAtTopology(ctx context.Context, t *Topology, results []*PlanResult) ([]string, map[string]string, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(t.Cluster), cl); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	problems := topologyProblems(cl, t)
	status := map[string]string{}
	for _, res := range results {
		l, err := r.LookAt(ctx, res)
		if err != nil {
			return nil, nil, err
		}
		problems = append(problems, l.Problems...)
		maps.Copy(status, l.Status(res))
	}
	return problems, status, nil
}

// topologyRevision is the revision recorded on the Cluster of sel, for an owner written through
// the topology.
func (r *Reader) topologyRevision(ctx context.Context, sel Selection) (string, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: sel.Cluster}, cl); err != nil {
		return "", usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", sel.Namespace, sel.Cluster))
	}
	return cl.GetAnnotations()[AnnotationRevision], nil
}

// topologySelections are the owners an upgrade of a managed topology changes, in the order the
// topology controller upgrades them: the control plane, then every MachineDeployment the
// topology made (label topologyOwnedLabel), by name. MachineDeployments the topology did not
// make and mds picks follow, written directly as in any other cluster.
func (r *Reader) topologySelections(ctx context.Context, cluster *unstructured.Unstructured, cpName string, mds Pick) ([]Selection, error) {
	ns, name := cluster.GetNamespace(), cluster.GetName()
	sels := []Selection{{Namespace: ns, Cluster: name, ControlPlane: cpName, Topology: true}}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(machineDeploymentGVK.GroupVersion().WithKind("MachineDeploymentList"))
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterNameLabel: name}); err != nil {
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
