package owners

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// DefaultLeaseDuration is how long an owner's Lease outlives an apply that stopped renewing it
// (a killed process), as for rollouts; a live holder renews it every third of that.
const DefaultLeaseDuration = 60 * time.Second

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
func LeaseKeys(sel Selection, machines []Machine) []records.Key {
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
		case l[deploymentNameLabel] != "":
			add(LeaseKindMachineDeployment, l[deploymentNameLabel])
		case l[controlPlaneNameLabel] != "":
			add(LeaseKindControlPlane, l[controlPlaneNameLabel])
		default:
			add(LeaseKindMachine, m.Plan.Machine)
		}
	}
	slices.SortFunc(keys, func(a, b records.Key) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(keys)
}

// holdLeases takes the Leases of keys for holder, in order (two applies meet at the first key
// they share, so neither holds what the other waits for). ctx's derivative runCtx is cancelled,
// with the reason as cause, when any of them is lost; release cancels it and gives every Lease
// back (for up to ten seconds, also after ctx is cancelled). A Lease another apply holds is the
// user error "In-Place Update Already Running".
func (p *Planner) holdLeases(ctx context.Context, keys []records.Key, req ExecuteRequest) (runCtx context.Context, release func(), err error) {
	duration := req.LeaseDuration
	if duration <= 0 {
		duration = DefaultLeaseDuration
	}
	var (
		held    []*records.Held
		cancels []context.CancelFunc
	)
	runCtx = ctx
	release = func() {
		for _, c := range slices.Backward(cancels) {
			c()
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, h := range slices.Backward(held) {
			_ = h.Release(rctx)
		}
	}
	for _, key := range keys {
		h, err := records.Acquire(ctx, p.Client, req.LeaseNamespace, key, req.Holder, duration, req.Clock)
		if err != nil {
			release()
			var busy *records.HeldError
			if errors.As(err, &busy) {
				return nil, nil, usererr.Wrap(err, "In-Place Update Already Running",
					fmt.Sprintf("Another apply is updating the machines of %s (it holds the Lease %s). Wait for it to finish; "+
						"if that process died, the Lease expires on its own and the next apply takes over.", key.Describe(), key.ObjectName()))
			}
			return nil, nil, fmt.Errorf("acquire the Lease of %s: %w", key.Describe(), err)
		}
		held = append(held, h)
		var cancel context.CancelFunc
		runCtx, cancel = h.Fence(runCtx)
		cancels = append(cancels, cancel)
	}
	return runCtx, release, nil
}
