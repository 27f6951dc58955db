// Package moduleassignment implements the `gradual_module_assignment` resource: Terraform glue
// around internal/assignment, which delivers modules to every matching cluster through the same
// delivery and engine as `gradual_rollout`.
package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

var pathModules = path.Root("modules")

// kind names the assignment in the resource, its status data source and their diagnostics.
var kind = fleetresource.Kind{Records: records.KindAssignment, Type: "_module_assignment", Title: "Module Assignment",
	Noun: "assignment", ImportExample: "fleet/cni", DefaultRecordNamespace: defaultRecordNamespace,
	Kept: "Every change it made is recorded in the clusters and bindings; the next apply continues from them."}

// New returns the resource; its `objects` hold a map per module.
func New() resource.Resource {
	r := &assignmentResource{}
	r.Ops, r.Kind, r.ObjectsByModule = r, kind, true
	return r
}

// NewStatusDataSource returns the `gradual_module_assignment_status` data source: every
// cluster's bindings, which the assignment's plan leaves out (it shows counts and the clusters
// needing attention), for outputs, `check` blocks and reviews of one cluster.
func NewStatusDataSource() datasource.DataSource {
	return fleetresource.NewStatus[statusModel](kind)
}

// assignmentResource runs through the engine's shared lifecycle (fleetresource.Lifecycle); its
// fleetresource.EngineOps are in moduleassignment_crud.go.
type assignmentResource struct {
	fleetresource.Lifecycle[Model, *Model, assignment.Spec]
}

var (
	_ fleetresource.EngineResource        = (*assignmentResource)(nil)
	_ resource.ResourceWithValidateConfig = (*assignmentResource)(nil)
)

// EngineSpec and EngineQuery map the model to the engine (fleetresource.EngineModel).
func (m *Model) EngineSpec(ctx context.Context) (assignment.Spec, diag.Diagnostics) {
	return m.spec(ctx)
}

// EngineQuery: see EngineSpec.
func (m *Model) EngineQuery(ctx context.Context, fallback *window.Window) (fleet.Query, diag.Diagnostics) {
	return m.query(ctx, fallback)
}
