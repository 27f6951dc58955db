package ownerupdate

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

func machineWithLabels(name string, labels map[string]string) owners.Machine {
	u := &unstructured.Unstructured{}
	u.SetName(name)
	u.SetLabels(labels)
	return owners.Machine{Current: inplace.Objects{Machine: u}, Plan: inplace.MachinePlan{Machine: name}}
}

func TestLeaseKeys(t *testing.T) {
	key := func(kind, name string) records.Key { return records.Key{Kind: kind, Namespace: "fleet", Name: name} }
	md := owners.Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md-0"}
	if got, want := LeaseKeys(md, []owners.Machine{machineWithLabels("m1", map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0"})}),
		[]records.Key{key(LeaseKindMachineDeployment, "md-0")}; !reflect.DeepEqual(got, want) {
		t.Errorf("MachineDeployment selection: %v, want %v", got, want)
	}
	if got, want := LeaseKeys(owners.Selection{Namespace: "fleet", Cluster: "c", ControlPlane: "cp"}, nil),
		[]records.Key{key(LeaseKindControlPlane, "cp")}; !reflect.DeepEqual(got, want) {
		t.Errorf("control plane selection: %v, want %v", got, want)
	}
}

// A second apply of an in-place update touching the same MachineDeployment is refused with a
// clear error; the first one's run context is cancelled when its Lease is lost.
func TestHoldLeasesAlreadyRunning(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	up := &Updater{Client: c}
	start := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	firstClock, secondClock := engine.NewFakeClock(start), engine.NewFakeClock(start.Add(-time.Hour))
	keys := LeaseKeys(owners.Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md-0"}, nil)

	runCtx, release, err := up.holdLeases(t.Context(), keys, ExecuteRequest{Holder: "first", Clock: firstClock})
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	type result struct {
		release func()
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, rel, err := up.holdLeases(t.Context(), keys, ExecuteRequest{Holder: "second", Clock: secondClock})
		done <- result{rel, err}
	}()
	// The first apply renews its Lease (a third of its duration on its clock) while the second
	// watches it.
	var got result
	deadline := time.Now().Add(10 * time.Second)
wait:
	for {
		select {
		case got = <-done:
			break wait
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("second apply still waiting after 10 s")
		}
		if firstClock.Pending() > 0 && secondClock.Pending() > 0 {
			firstClock.Advance(2 * time.Second)
			secondClock.Advance(time.Second)
		}
	}
	u, ok := usererr.As(got.err)
	if !ok || u.Summary != "In-Place Update Already Running" || !strings.Contains(got.err.Error(), "MachineDeployment fleet/md-0 is being applied by first") {
		t.Fatalf("second apply: %v", got.err)
	}
	if runCtx.Err() != nil {
		t.Fatalf("first apply's context cancelled: %v", context.Cause(runCtx))
	}

	// The Lease is deleted under the first apply: its run stops, saying why.
	l := &unstructured.Unstructured{}
	l.SetAPIVersion("coordination.k8s.io/v1")
	l.SetKind("Lease")
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: records.DefaultNamespace, Name: keys[0].ObjectName()}, l); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	for runCtx.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("run context not cancelled after the Lease was deleted")
		}
		firstClock.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	if cause := context.Cause(runCtx); !errors.Is(cause, records.ErrLeaseLost) || !strings.Contains(cause.Error(), "MachineDeployment fleet/md-0 was deleted") {
		t.Fatalf("cause: %v", cause)
	}
}

// The provider's lease_duration reaches the in-place Leases: an owner's Lease is taken for
// Settings.LeaseDuration, and for the one default when it is unset.
func TestHoldLeasesHonoursLeaseDuration(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  settings.Settings
		want int32
	}{
		{settings.Settings{LeaseDuration: 90 * time.Second}, 90},
		{settings.Settings{}, int32(settings.DefaultLeaseDuration / time.Second)},
	} {
		c := fake.NewClientBuilder().WithScheme(s).Build()
		up := &Updater{Client: c, Settings: tc.set}
		keys := LeaseKeys(owners.Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md-0"}, nil)
		clock := engine.NewFakeClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
		_, release, err := up.holdLeases(t.Context(), keys, ExecuteRequest{Holder: "apply", Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		l := &coordinationv1.Lease{}
		err = c.Get(t.Context(), client.ObjectKey{Namespace: records.DefaultNamespace, Name: keys[0].ObjectName()}, l)
		release()
		if err != nil {
			t.Fatal(err)
		}
		if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != tc.want {
			t.Errorf("lease_duration %v: the Lease lasts %ds, want %ds", tc.set.LeaseDuration, got, tc.want)
		}
	}
}
