// Package rollout implements the `gradual_rollout` resource: Terraform glue around
// internal/delivery, which carries a revision to the picked clusters in verified waves.
package rollout

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
)

var (
	pathSelector    = path.Root("selector")
	pathManifests   = path.Root("manifests")
	pathUpdateLimit = path.Root("update_limit")
	pathMaxFailures = path.Root("max_failures")
	pathOnFailure   = path.Root("on_failure")
)

// New returns the resource.
func New() resource.Resource { return &rolloutResource{} }

type rolloutResource struct{ data *providerdata.Data }

var (
	_ resource.ResourceWithConfigure   = (*rolloutResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*rolloutResource)(nil)
	_ resource.ResourceWithImportState = (*rolloutResource)(nil)
)

func (r *rolloutResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rollout"
}

func (r *rolloutResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

// ImportState takes `namespace/name`; Read then fills everything from the records.
func (r *rolloutResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	namespace, name, ok := strings.Cut(req.ID, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		resp.Diagnostics.AddError("Invalid Import ID",
			fmt.Sprintf("Import ID %q must be namespace/name: the namespace of the Cluster objects and the rollout's name, e.g. fleet/ingress.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
