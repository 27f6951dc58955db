package providerdata

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// New resolves the settings once and hands the same value to every service: in-place updates,
// single-owner and fleet, get the provider's lease_duration and max_parallel_clusters as
// delivery does; an unset setting is its one default everywhere.
func TestNewHandsTheSettingsToEveryService(t *testing.T) {
	mgmt := &fleet.Management{Client: fake.NewClientBuilder().Build()}
	w := &window.Window{}
	set := settings.Settings{LeaseDuration: 90 * time.Second, Parallelism: 7, Window: w}
	d := New(mgmt, fleet.NewClients(mgmt, nil), set)
	want := set.WithDefaults()
	if d.Settings != want {
		t.Errorf("Settings %+v, want %+v", d.Settings, want)
	}
	planner, _ := d.FleetUpdate.OwnerPlanner.(*owners.Planner)
	updater, _ := d.FleetUpdate.OwnerUpdater.(*ownerupdate.Updater)
	if planner == nil || updater == nil || planner.Settings != want || updater.Settings != want || d.FleetUpdate.Settings != want {
		t.Errorf("in-place settings: planner %+v, updater %+v, service %+v, want %+v", planner, updater, d.FleetUpdate.Settings, want)
	}
	if d.FleetUpdate.Updater != fleetupdate.Updater(updater) || d.FleetUpdate.Planner != fleetupdate.Planner(planner) {
		t.Errorf("the fleet form plans or updates through another Planner or Updater than the single-owner form")
	}
	if d.Window() != w {
		t.Errorf("Window() = %v, want the provider's", d.Window())
	}

	d = New(mgmt, fleet.NewClients(mgmt, nil), settings.Settings{})
	if d.FleetUpdate.OwnerUpdater.(*ownerupdate.Updater).Settings.LeaseDuration != settings.DefaultLeaseDuration || d.FleetUpdate.Settings.Parallelism != settings.DefaultParallelism {
		t.Errorf("unset settings: in-place %+v, fleet %+v", d.FleetUpdate.OwnerUpdater, d.FleetUpdate.Settings)
	}
}
