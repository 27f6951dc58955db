package owners

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Statuses only a refresh (Observe) reports.
const (
	// StatusUpdating: the machine is as desired in spec but Cluster API has not finished with
	// it (not UpToDate, Updating, or CAPI's in-place bookkeeping still on it).
	StatusUpdating = "updating"
	// StatusDrifted: the machine was updated (or already as desired) but its specs no longer
	// are the desired ones (changed outside Terraform); the next apply updates it again.
	StatusDrifted = "drifted"
	// StatusUnverified: the specs are the desired ones but the machine's Node is not Ready or
	// reports another kubelet version.
	StatusUnverified = "unverified"
)

// Observed is one selected machine as it is now, without asking any extension.
type Observed struct {
	Machine string
	Node    string
	// Version is the Machine's spec.version.
	Version string
	// Changed are the spec fields that still differ from the desired ones.
	Changed []inplace.Field
	// Pending says why Cluster API is not done with the machine ("" when it is).
	Pending string
	// NodeProblem says why the Node does not pass verification; "" when it does or was not
	// looked at.
	NodeProblem string
}

// Observation is every selected machine as it is now.
type Observation struct {
	Machines []Observed
	// OwnerGone: the selected MachineDeployment or KubeadmControlPlane no longer exists (so
	// neither do its machines).
	OwnerGone bool
	// OwnerRevision is the owner's AnnotationRevision.
	OwnerRevision string
	// Notes are things worth a warning (the workload cluster could not be read).
	Notes []string
}

// Observe reads the selected owner, its machines and, for those whose specs are the desired
// ones, their Nodes in the workload cluster. It calls no extension and writes nothing. A
// workload cluster that cannot be read is a note, not an error.
func (p *Planner) Observe(ctx context.Context, sel Selection, change inplace.Change) (*Observation, error) {
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
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: name}, owner); err != nil {
		if apierrors.IsNotFound(err) {
			out.OwnerGone = true
			return out, nil
		}
		return nil, usererr.Wrap(err, "Cannot Read "+owner.GetKind(), fmt.Sprintf("Reading %s %s/%s failed.", owner.GetKind(), sel.Namespace, name))
	}
	out.OwnerRevision = owner.GetAnnotations()[AnnotationRevision]
	if sel.Topology {
		// Written through the Cluster's topology: the Cluster carries the revision.
		rev, err := p.topologyRevision(ctx, sel)
		if err != nil {
			return nil, err
		}
		out.OwnerRevision = rev
	}
	objs, err := readMachines(ctx, p.Client, sel)
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
		if len(ob.Changed) == 0 && ob.Pending == "" && ob.Node != "" && p.Workload != nil && len(out.Notes) == 0 {
			if wc == nil {
				if wc, err = p.Workload(ctx, sel.Namespace, sel.Cluster); err != nil {
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

// Status is the status a refresh reports for a machine, given the status the last apply
// recorded ("" for a machine it never saw).
func (o Observed) Status(prior string) string {
	switch {
	case len(o.Changed) > 0 && (prior == StatusUpdated || prior == StatusUnchanged || prior == StatusCreated || prior == StatusDrifted):
		return StatusDrifted
	case len(o.Changed) > 0:
		return StatusNotStarted
	case o.Pending != "":
		return StatusUpdating
	case o.NodeProblem != "":
		return StatusUnverified
	case prior == StatusUpdated || prior == StatusUnchanged || prior == StatusCreated:
		return prior
	}
	return StatusUnchanged
}

// CommonVersion is the spec.version every observed machine has, "" when they differ or there
// are none.
func (ob *Observation) CommonVersion() string {
	v := ""
	for i, m := range ob.Machines {
		if i > 0 && m.Version != v {
			return ""
		}
		v = m.Version
	}
	return v
}

// Plan is the plan of the observed machines when nothing is left to do: each unchanged. It is
// what an imported resource records, so that a plan with its configuration is empty.
func (ob *Observation) Plan() inplace.Plan {
	var p inplace.Plan
	for _, m := range ob.Machines {
		p.Machines = append(p.Machines, inplace.MachinePlan{Machine: m.Machine, Node: m.Node, Changed: slices.Clone(m.Changed), Strategy: inplace.StrategyUnchanged})
	}
	return p
}
