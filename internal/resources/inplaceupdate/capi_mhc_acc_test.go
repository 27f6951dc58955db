package inplaceupdate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// What Cluster API v1.14.2 does with a MachineHealthCheck on machines it updates in place, and
// what the plan says about it. The MachineHealthCheck selects mem-1's workers and holds a
// Machine unhealthy while its Updating condition is True (the in-memory backend keeps Nodes
// Ready through an update, so a Node condition would never trip; a real kubelet restart would
// turn Ready Unknown the same way). The preview names the check and its timeouts in a note;
// the version bump written to the MachineDeployment as the resource writes it then has Cluster
// API start the update in place and the MachineHealthCheck, which shields only paused and
// skip-remediation Machines, mark the updating Machine unhealthy and have it remediated: the
// Machine that was being updated is deleted and replaced (a new UID).
func TestAccCAPIInPlace_healthCheckDuringUpdate(t *testing.T) {
	acctest.OnOneLane(t, serviceLane) // what Cluster API does, not how a CLI drives the provider
	f, mc := capiFleet(t)
	playKubelet(t, mc)
	ctx := context.Background()
	before := worker(t, mc)
	oldVersion := machineDeployment(t, mc).Spec.Template.Spec.Version
	version := otherVersion(oldVersion)

	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: testbed.DefaultClusterAPINamespace, Name: memCluster + "-workers",
			Labels: map[string]string{clusterv1.WatchLabel: testbed.ClusterAPIWatchFilter}},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: memCluster,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: workers}},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr.To[int32](600),
				UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{
					Type: clusterv1.MachineUpdatingCondition, Status: metav1.ConditionTrue, TimeoutSeconds: ptr.To[int32](0),
				}},
			},
		},
	}
	if err := mc.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.IgnoreNotFound(mc.Delete(context.Background(), mhc)); err != nil {
			t.Errorf("remove MachineHealthCheck %s: %v", mhc.Name, err)
		}
	})

	cfg, err := f.Management.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&owners.Planner{Client: mc, RESTConfig: cfg}).Plan(ctx, owners.Request{
		Selection: owners.Selection{Namespace: testbed.DefaultClusterAPINamespace, Cluster: memCluster, MachineDeployment: workers},
		Change:    inplace.Change{Version: version}, Fallback: inplace.FallbackNone,
	})
	if err != nil {
		t.Fatal(err)
	}
	var note string
	for _, n := range res.Notes {
		if strings.Contains(n, "MachineHealthCheck "+mhc.Namespace+"/"+mhc.Name) {
			note = n
		}
	}
	mp := res.Plan.Machines[0]
	if mp.Strategy != inplace.StrategyInPlace || note == "" || !strings.Contains(note, before.Name) || !strings.Contains(note, "Machine Updating=True for 0s") {
		t.Fatalf("preview: %s %s, notes %q; want in place and a note naming %s, %s and its Updating check", mp.Machine, mp.Strategy, res.Notes, mhc.Name, before.Name)
	}

	// Written as the resource writes it (the owner's version), without the resource's verify,
	// which would stop at the replaced Machine.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		md := machineDeployment(t, mc)
		md.Spec.Template.Spec.Version = version
		return mc.Update(ctx, &md)
	}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var remediated bool
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var m clusterv1.Machine
		err := mc.Get(ctx, client.ObjectKey{Namespace: before.Namespace, Name: before.Name}, &m)
		if client.IgnoreNotFound(err) != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		if err != nil || m.UID != before.UID { // not found: the Machine is gone, which is the answer
			seen = append(seen, "gone")
			remediated = true
			return true, nil //nolint:nilerr // see above
		}
		state := fmt.Sprintf("version=%s updating=%v healthy=%v ownerRemediated=%v deleting=%v", m.Spec.Version,
			meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition),
			condStatus(m, clusterv1.MachineHealthCheckSucceededCondition), condStatus(m, clusterv1.MachineOwnerRemediatedCondition), !m.DeletionTimestamp.IsZero())
		if len(seen) == 0 || seen[len(seen)-1] != state {
			seen = append(seen, state)
		}
		if !m.DeletionTimestamp.IsZero() {
			remediated = true
			return true, nil
		}
		// Updated in place and left alone: the other outcome.
		return m.Spec.Version == version && meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition) &&
			!meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpdatingCondition), nil
	})
	if err != nil {
		t.Fatalf("Machine %s: neither remediated nor updated: %v; states %s", before.Name, err, strings.Join(seen, " → "))
	}
	if !remediated {
		t.Fatalf("Machine %s was updated in place and not remediated although its MachineHealthCheck held it unhealthy while updating (states %s): Cluster API shields updating machines now; the plan note is wrong",
			before.Name, strings.Join(seen, " → "))
	}
	after := worker(t, mc)
	if after.UID == before.UID {
		t.Fatalf("worker Machine kept UID %s after remediation", before.UID)
	}
	t.Logf("preview: %s in place, note %q; Cluster API: Machine %s (UID %s) went %s and was replaced by %s (UID %s, %s)",
		mp.Machine, note, before.Name, before.UID, strings.Join(seen, " → "), after.Name, after.UID, after.Spec.Version)
}

func condStatus(m clusterv1.Machine, typ string) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, typ); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "-"
}
