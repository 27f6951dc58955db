// Package providerdata is what the provider's Configure hands to every resource, data source and
// function: the management cluster, the workload clients' owner, the delivery and in-place
// services, and the provider-wide settings they were all built with (New).
package providerdata

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// Data is the provider's configured state.
//
// It holds services, not clients: every workload cluster's clients are owned by one
// fleet.Clients (built once per cluster and provider process, under one freshness rule),
// which Delivery and FleetUpdate share.
type Data struct {
	// Management discovers the fleet's Clusters and reads their credentials.
	Management *fleet.Management
	// Delivery carries revisions to the workload clusters.
	Delivery *delivery.Service
	// InPlaceReader reads the machines of owners as they are now, for a refresh.
	InPlaceReader *owners.Reader
	// FleetUpdate plans and carries out in-place updates of machines: over clusters (the fleet
	// form) and of one owner (the single-owner form).
	FleetUpdate *fleetupdate.Service
	// Replacements are the creates this process planned as replacements (see Replacements).
	Replacements *Replacements
	// Settings are the provider's settings, with their defaults filled in: the same value every
	// service above was built with.
	Settings settings.Settings
}

// New builds the provider's services over mgmt and clients under set, once per configuration:
// the settings are resolved here (defaults filled in) and handed, as one value, to delivery
// (rollouts and module assignments) and to in-place updates, single-owner and fleet.
func New(mgmt *fleet.Management, clients *fleet.Clients, set settings.Settings) *Data {
	set = set.WithDefaults()
	planner := &owners.Planner{Client: mgmt.Client, RESTConfig: mgmt.RESTConfig, Settings: set}
	reader := &owners.Reader{Client: mgmt.Client, Workload: clients.Client}
	updater := &ownerupdate.Updater{Client: mgmt.Client, Reader: reader, Settings: set}
	return &Data{
		Management:    mgmt,
		Delivery:      delivery.New(clients, set),
		InPlaceReader: reader,
		FleetUpdate: &fleetupdate.Service{Fleet: mgmt, Planner: planner, Updater: updater, Observer: reader,
			OwnerPlanner: planner, OwnerUpdater: updater, Settings: set},
		Replacements: &Replacements{},
		Settings:     set,
	}
}

// Window is the provider's maintenance_window, nil when it sets none or while the provider is
// not configured.
func (d *Data) Window() *window.Window {
	if d == nil {
		return nil
	}
	return d.Settings.Window
}

// From checks and converts the ProviderData a resource or data source receives in Configure.
// It returns nil without error while the provider is not configured yet (early validation).
func From(providerData any, diags *diag.Diagnostics) *Data {
	if providerData == nil {
		return nil
	}
	data, ok := providerData.(*Data)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *providerdata.Data, got %T. This is a bug in the provider; please report it.", providerData))
		return nil
	}
	return data
}

// Configured reports whether d holds the provider's data, and adds the error that says the
// provider is not configured yet when it does not (nil until Configure has it: in validation, and
// in plans whose provider settings are not known yet). Every resource and data source that
// reaches the management cluster refuses alike with it.
func (d *Data) Configured(diags *diag.Diagnostics) bool {
	if d == nil {
		diags.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return false
	}
	return true
}

// Getter is what a request reads a model from: its configuration, plan or state.
type Getter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

// Read reads from into target for an operation that reaches the management cluster. It reports
// false, with the error in diags, when from cannot be read or the provider is not configured
// (Configured).
func (d *Data) Read(ctx context.Context, from Getter, target any, diags *diag.Diagnostics) bool {
	diags.Append(from.Get(ctx, target)...)
	return !diags.HasError() && d.Configured(diags)
}
