// Package rollout implements the `gradual_rollout` resource: Terraform glue around
// internal/delivery, which carries a revision to the picked clusters in verified waves.
package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/lifecycle"
)

var (
	pathManifests    = path.Root("manifests")
	pathSensitive    = path.Root("sensitive_manifests")
	pathIgnoreFields = path.Root("ignore_fields")
	pathSensPaths    = path.Root("sensitive_paths")
	pathOnFailure    = path.Root("on_failure")
)

// New returns the resource.
func New() resource.Resource { return &rolloutResource{} }

type rolloutResource struct{ lifecycle.Configured }

var (
	_ resource.ResourceWithConfigure   = (*rolloutResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*rolloutResource)(nil)
	_ resource.ResourceWithImportState = (*rolloutResource)(nil)
)

func (r *rolloutResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rollout"
}

// ImportState takes `namespace/name`; Read then fills everything from the records.
func (r *rolloutResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	lifecycle.ImportNamespaceName(ctx, req, resp, "rollout", "fleet/ingress")
}
