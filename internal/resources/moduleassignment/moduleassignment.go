// Package moduleassignment implements the `gradual_module_assignment` resource: Terraform glue
// around internal/assignment, which delivers modules to every matching cluster through the same
// delivery and engine as `gradual_rollout`.
package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

var pathModules = path.Root("modules")

// New returns the resource.
func New() resource.Resource {
	r := &assignmentResource{}
	r.Ops, r.TypeSuffix, r.Noun, r.ImportExample = r, "_module_assignment", "assignment", "fleet/cni"
	r.Failed = fleetresource.FailedCreate{Title: "Module Assignment Not Saved In State",
		Detail: "The assignment failed before it completed, so it is not saved in the Terraform state. Every change it made is recorded in the clusters and bindings; the next apply continues from them."}
	return r
}

// assignmentResource runs through the engine's shared lifecycle (fleetresource.Lifecycle); its
// fleetresource.EngineOps are in moduleassignment_crud.go.
type assignmentResource struct {
	fleetresource.Lifecycle[Model, *Model, assignment.Spec]
}

var (
	_ resource.ResourceWithConfigure      = (*assignmentResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*assignmentResource)(nil)
	_ resource.ResourceWithImportState    = (*assignmentResource)(nil)
	_ resource.ResourceWithValidateConfig = (*assignmentResource)(nil)
	_ resource.ResourceWithUpgradeState   = (*assignmentResource)(nil)
)

// UpgradeState upgrades states from before schema version 1, whose `waves` held lists of counts
// per module, to `waves` as text, and from before version 2, whose `objects` held YAML, to JSON
// (fleetresource.Upgraders).
func (r *assignmentResource) UpgradeState(ctx context.Context) map[int64]resource.StateUpgrader {
	var resp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &resp)
	return fleetresource.Upgraders("gradual_module_assignment", resp.Schema, true)
}

// EngineSpec and EngineQuery map the model to the engine (fleetresource.EngineModel).
func (m *Model) EngineSpec(ctx context.Context) (assignment.Spec, diag.Diagnostics) {
	return m.spec(ctx)
}

// EngineQuery: see EngineSpec.
func (m *Model) EngineQuery(ctx context.Context, fallback *window.Window) (fleet.Query, diag.Diagnostics) {
	return m.query(ctx, fallback)
}
