// Package rollout implements the `gradual_rollout` resource: Terraform glue around
// internal/delivery, which carries a revision to the picked clusters in verified waves.
package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

var (
	pathManifests    = path.Root("manifests")
	pathSensitive    = path.Root("sensitive_manifests")
	pathIgnoreFields = path.Root("ignore_fields")
	pathSensPaths    = path.Root("sensitive_paths")
)

// kind names the rollout in the resource, its status data source and their diagnostics.
var kind = fleetresource.Kind{Records: records.KindRollout, Type: "_rollout", Title: "Rollout", Noun: "rollout",
	ImportExample: "fleet/ingress", DefaultRecordNamespace: defaultRecordNamespace,
	Kept: "Every change it made is recorded in the clusters; the next apply continues from those records instead of starting over."}

// New returns the resource.
func New() resource.Resource {
	r := &rolloutResource{}
	r.Ops, r.Kind = r, kind
	return r
}

// NewStatusDataSource returns the `gradual_rollout_status` data source: the per-cluster detail
// that the rollout's plan leaves out (it shows counts and the clusters needing attention), for
// outputs, `check` blocks and reviews of one cluster.
func NewStatusDataSource() datasource.DataSource {
	return fleetresource.NewStatus[statusModel](kind)
}

// rolloutResource runs through the engine's shared lifecycle (fleetresource.Lifecycle); its
// fleetresource.EngineOps are in rollout_crud.go.
type rolloutResource struct {
	fleetresource.Lifecycle[Model, *Model, delivery.Spec]
}

var _ fleetresource.EngineResource = (*rolloutResource)(nil)

// EngineSpec and EngineQuery map the model to the engine (fleetresource.EngineModel).
func (m *Model) EngineSpec(ctx context.Context) (delivery.Spec, diag.Diagnostics) { return m.spec(ctx) }

// EngineQuery: see EngineSpec.
func (m *Model) EngineQuery(ctx context.Context, fallback *window.Window) (fleet.Query, diag.Diagnostics) {
	return m.query(ctx, fallback)
}
