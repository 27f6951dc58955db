// Package clusters implements the `gradual_clusters` data source: the CAPI Clusters a selector or
// a list of names picks, with each one's readiness and the reason a rollout would skip it.
package clusters

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// New returns the data source.
func New() datasource.DataSource { return &dataSource{} }

type dataSource struct{ data *providerdata.Data }

var _ datasource.DataSourceWithConfigure = (*dataSource)(nil)

func (d *dataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_clusters"
}

func (d *dataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

func (d *dataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var model Model
	if !d.data.Read(ctx, req.Config, &model, &resp.Diagnostics) {
		return
	}
	labelSelector, diags := fleetresource.ToLabelSelector(ctx, model.Selector)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	selector, err := labelSelector.Selector()
	if err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(path.Root("selector"), err, "Invalid Selector"))
		return
	}
	query := fleet.Query{Namespace: model.Namespace.ValueString(), Selector: selector}
	resp.Diagnostics.Append(model.Names.ElementsAs(ctx, &query.Names, false)...)
	if resp.Diagnostics.HasError() {
		return
	}

	found, err := d.data.Management.Discover(ctx, query)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot List Clusters"))
		return
	}
	if len(found.Missing) > 0 {
		resp.Diagnostics.AddAttributeWarning(path.Root("names"), "Clusters Not Found",
			fmt.Sprintf("No Cluster named %s exists in namespace %q; they are left out of the result.",
				strings.Join(found.Missing, ", "), query.Namespace))
	}
	resp.Diagnostics.Append(model.fill(ctx, found)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &model)...)
}

func eligibleNames(found *fleet.Discovery) []string {
	names := []string{}
	for _, c := range found.Eligible() {
		names = append(names, c.Name)
	}
	return names
}
