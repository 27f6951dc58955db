package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// valuesText is what a rollout says in `values` (fleetresource.ValuesAttribute).
var valuesText = fleetresource.ValuesText{Template: "`manifests` and `sensitive_manifests` are a template"}

// values converts `values` (nil when not set). The caller has checked it is fully known.
func (m *Model) values(ctx context.Context) (*delivery.Values, diag.Diagnostics) {
	return fleetresource.Values(ctx, m.Values)
}

// observe is the refresh's read of the fleet (drift included). With `values`, each cluster's
// record is also compared with what the state's `manifests` render for it now: the public half
// only, as the sensitive half is write-only and not in the state. With or without, a cluster
// whose records hold nothing is checked for objects of the state's `manifests` under the
// rollout's field manager (records missing, delivery.StateRecordsMissing).
func (m *Model) observe(ctx context.Context, svc *delivery.Service, query fleet.Query, key records.Key) (*delivery.Observation, error) {
	values, diags := m.values(ctx)
	template, err := m.bundle()
	if err != nil || m.Revision.IsNull() {
		return svc.Observe(ctx, query, key, m.RecordNamespace.ValueString(), true, m.ignore(ctx)...)
	}
	if diags.HasError() {
		values = nil
	}
	return svc.ObserveRendered(ctx, query, key, m.RecordNamespace.ValueString(),
		delivery.Rendering{Revision: m.Revision.ValueString(), Template: template, Values: values}, m.ignore(ctx)...)
}
