// Package moduleassignment implements the `gradual_module_assignment` resource: Terraform glue
// around internal/assignment, which delivers modules to every matching cluster through the same
// delivery and engine as `gradual_rollout`.
package moduleassignment

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
	pathModules     = path.Root("modules")
	pathUpdateLimit = path.Root("update_limit")
	pathMaxFailures = path.Root("max_failures")
)

// New returns the resource.
func New() resource.Resource { return &assignmentResource{} }

type assignmentResource struct{ data *providerdata.Data }

var (
	_ resource.ResourceWithConfigure      = (*assignmentResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*assignmentResource)(nil)
	_ resource.ResourceWithImportState    = (*assignmentResource)(nil)
	_ resource.ResourceWithValidateConfig = (*assignmentResource)(nil)
)

func (r *assignmentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_module_assignment"
}

func (r *assignmentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

// ImportState takes `namespace/name`; Read then fills everything from the records.
func (r *assignmentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	namespace, name, ok := strings.Cut(req.ID, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		resp.Diagnostics.AddError("Invalid Import ID",
			fmt.Sprintf("Import ID %q must be namespace/name: the namespace of the Cluster objects and the assignment's name, e.g. fleet/cni.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
