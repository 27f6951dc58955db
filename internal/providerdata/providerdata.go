// Package providerdata is what the provider's Configure hands to every resource, data source and
// function: the management cluster, the workload clients' owner, the delivery service and
// provider-wide settings.
package providerdata

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// Data is the provider's configured state.
type Data struct {
	Management *fleet.Management
	// Clients owns every workload cluster's clients (built once per cluster and provider
	// process, under one freshness rule); Delivery and in-place updates both use it.
	Clients *fleet.Clients
	// Delivery carries revisions to the workload clusters; resources share it so that each
	// cluster's clients are built once per run of the provider.
	Delivery *delivery.Service
	// Replacements are the creates this process planned as replacements (see Replacements).
	Replacements *Replacements
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
