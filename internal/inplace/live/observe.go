package live

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Statuses only a refresh (Observe) reports.
const (
	// StatusUpdating: the Machine's annotation says an update to this revision started and
	// never finished (an interrupted run); the next apply resumes it.
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
	// Revision and State are the Machine's annotations (AnnotationRevision, AnnotationState).
	Revision, State string
	// NodeProblem says why the Node does not pass verification; "" when it does or was not
	// looked at (NodeChecked false).
	NodeProblem string
	NodeChecked bool
}

// Observation is every selected machine as it is now.
type Observation struct {
	Machines []Observed
	// DeploymentGone: the selected MachineDeployment no longer exists (so neither do its
	// machines).
	DeploymentGone bool
	// Notes are things worth a warning (the workload cluster could not be read).
	Notes []string
}

// Observe reads the selected machines and, for those whose specs are the desired ones, their
// Nodes in the workload cluster. It calls no extension. A workload cluster that cannot be read
// is a note, not an error: the machines' own state still says most.
func (p *Planner) Observe(ctx context.Context, sel Selection, change inplace.Change) (*Observation, error) {
	if err := change.Validate(); err != nil {
		return nil, usererr.Wrap(err, "Invalid Spec Patch", "Each spec patch must be a JSON object: a JSON merge patch (RFC 7386) of the object's spec.")
	}
	out := &Observation{}
	if sel.MachineDeployment != "" {
		md := &unstructured.Unstructured{}
		md.SetGroupVersionKind(machineDeploymentGVK)
		err := p.Client.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: sel.MachineDeployment}, md)
		if apierrors.IsNotFound(err) {
			out.DeploymentGone = true
			return out, nil
		}
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
		ann := o.Machine.GetAnnotations()
		ob.Revision, ob.State = ann[AnnotationRevision], ann[AnnotationState]
		des, err := inplace.Desired(o, change)
		if err != nil {
			return nil, usererr.Wrap(err, "Change Does Not Apply", fmt.Sprintf("The change cannot be applied to Machine %s/%s.", o.Machine.GetNamespace(), ob.Machine))
		}
		if ob.Changed, err = inplace.ChangedFields(o, des); err != nil {
			return nil, usererr.Wrap(err, "Cannot Compare Specs", fmt.Sprintf("The specs of Machine %s/%s cannot be compared with the desired ones.", o.Machine.GetNamespace(), ob.Machine))
		}
		if len(ob.Changed) == 0 && ob.Node != "" && p.Workload != nil && len(out.Notes) == 0 {
			if wc == nil {
				if wc, err = p.Workload(ctx, sel.Namespace, sel.Cluster); err != nil {
					out.Notes = append(out.Notes, fmt.Sprintf("the Nodes of cluster %s/%s were not checked: %v", sel.Namespace, sel.Cluster, err))
				}
			}
			if wc != nil {
				want, _, _ := unstructured.NestedString(des.Machine.Object, "spec", "version")
				var node corev1.Node
				switch err := wc.Get(ctx, client.ObjectKey{Name: ob.Node}, &node); {
				case apierrors.IsNotFound(err):
					ob.NodeChecked, ob.NodeProblem = true, fmt.Sprintf("Node %s does not exist", ob.Node)
				case err != nil:
					out.Notes = append(out.Notes, fmt.Sprintf("the Nodes of cluster %s/%s were not checked: %v", sel.Namespace, sel.Cluster, err))
				default:
					ob.NodeChecked = true
					if p := nodeProblem(&node, want); p != nil {
						ob.NodeProblem = p.Error()
					}
				}
			}
		}
		out.Machines = append(out.Machines, ob)
	}
	return out, nil
}

// Status is the status a refresh reports for a machine, given the revision the resource
// applies and the status it last recorded ("" for a machine it never saw).
func (o Observed) Status(revision, prior string) string {
	atDesired := len(o.Changed) == 0
	ours := o.Revision == revision && revision != ""
	switch {
	case ours && o.State == StateUpdating:
		return StatusUpdating
	case ours && o.State == StateFailed:
		return StatusFailed
	case !atDesired && prior == StatusRolloutRequested:
		return StatusRolloutRequested // CAPI has yet to replace it
	case !atDesired && (prior == StatusUpdated || prior == StatusUnchanged || prior == StatusDrifted || ours):
		return StatusDrifted
	case !atDesired:
		return StatusNotStarted
	case o.NodeProblem != "":
		return StatusUnverified
	case prior == StatusUpdated || prior == StatusUnchanged:
		return prior
	case ours && o.State == StateDone:
		return StatusUpdated
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

// CommonRevision is the revision every observed machine's annotation records as done, ""
// when they differ, one is not done, or there are none.
func (ob *Observation) CommonRevision() string {
	r := ""
	for i, m := range ob.Machines {
		if m.State != StateDone || m.Revision == "" || (i > 0 && m.Revision != r) {
			return ""
		}
		r = m.Revision
	}
	return r
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

// resumable reports whether a machine whose specs are already the desired ones was left
// mid-update by an interrupted (or failed) run of this revision: the run wrote the specs, but
// never verified the machine.
func resumable(m inplace.Objects, revision string) bool {
	ann := m.Machine.GetAnnotations()
	return ann[AnnotationRevision] == revision && (ann[AnnotationState] == StateUpdating || ann[AnnotationState] == StateFailed)
}

// recordedExtensions are the extensions the Machine's annotation says its update was given to.
func recordedExtensions(m inplace.Objects) []string {
	s := m.Machine.GetAnnotations()[AnnotationExtensions]
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
