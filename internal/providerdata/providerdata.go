// Package providerdata is what the provider's Configure hands to every resource, data source and
// function: the management cluster, the workload clients' owner, the delivery service and
// provider-wide settings.
package providerdata

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// Data is the provider's configured state.
//
// It holds services, not clients: every workload cluster's clients are owned by one
// fleet.Clients (built once per cluster and provider process, under one freshness rule),
// which Delivery and InPlace share.
type Data struct {
	// Management discovers the fleet's Clusters and reads their credentials.
	Management *fleet.Management
	// Delivery carries revisions to the workload clusters.
	Delivery *delivery.Service
	// InPlace plans and carries out in-place updates of machines.
	InPlace *owners.Planner
	// Replacements are the creates this process planned as replacements (see Replacements).
	Replacements *Replacements
	// MaintenanceWindow is the provider's `maintenance_window`: the window of every rollout and
	// module assignment that sets none of its own (nil: none).
	MaintenanceWindow *window.Window
}

// Window is d's MaintenanceWindow, nil while the provider is not configured.
func (d *Data) Window() *window.Window {
	if d == nil {
		return nil
	}
	return d.MaintenanceWindow
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
