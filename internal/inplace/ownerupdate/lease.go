package ownerupdate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Lease key kinds: an in-place update holds one Lease per owner of the machines it updates, in
// the records namespace of the management cluster, named like a rollout's (records.Key).
const (
	LeaseKindMachineDeployment = "MachineDeployment"
	LeaseKindControlPlane      = "ControlPlane"
	// LeaseKindMachine keys a Machine that belongs to neither.
	LeaseKindMachine = "Machine"
)

// LeaseKeys are the Leases an update of sel holds: its MachineDeployment or control plane, and
// the owners of machines (their MachineDeployment, else their control plane, else the Machine
// itself), sorted and without repeats.
func LeaseKeys(sel owners.Selection, machines []owners.Machine) []records.Key {
	var keys []records.Key
	add := func(kind, name string) {
		if name != "" {
			keys = append(keys, records.Key{Kind: kind, Namespace: sel.Namespace, Name: name})
		}
	}
	add(LeaseKindMachineDeployment, sel.MachineDeployment)
	add(LeaseKindControlPlane, sel.ControlPlane)
	for _, m := range machines {
		var l map[string]string
		if m.Current.Machine != nil {
			l = m.Current.Machine.GetLabels()
		}
		switch {
		case l[clusterv1.MachineDeploymentNameLabel] != "":
			add(LeaseKindMachineDeployment, l[clusterv1.MachineDeploymentNameLabel])
		case l[clusterv1.MachineControlPlaneNameLabel] != "":
			add(LeaseKindControlPlane, l[clusterv1.MachineControlPlaneNameLabel])
		default:
			add(LeaseKindMachine, m.Plan.Machine)
		}
	}
	slices.SortFunc(keys, func(a, b records.Key) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(keys)
}

// holdLeases takes the Leases of keys (sorted: LeaseKeys) for holder with records.Hold, for
// the provider's lease_duration (Settings.LeaseDuration), as a rollout's. A Lease another apply
// holds is the user error "In-Place Update Already Running".
func (up *Updater) holdLeases(ctx context.Context, keys []records.Key, req ExecuteRequest) (runCtx context.Context, release func(), err error) {
	duration := up.Settings.WithDefaults().LeaseDuration
	runCtx, release, err = records.Hold(ctx, up.Client, req.LeaseNamespace, keys, req.Holder, duration, req.Clock)
	if err != nil {
		var busy *records.HeldError
		if errors.As(err, &busy) {
			return nil, nil, usererr.Wrap(err, "In-Place Update Already Running",
				fmt.Sprintf("Another apply is updating the machines of %s (it holds the Lease %s). Wait for it to finish; "+
					"if that process died, the Lease expires on its own and the next apply takes over.", busy.Key.Describe(), busy.Key.ObjectName()))
		}
		return nil, nil, fmt.Errorf("acquire the Leases of %d owners: %w", len(keys), err)
	}
	return runCtx, release, nil
}
