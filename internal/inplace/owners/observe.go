package owners

import (
	"slices"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
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
