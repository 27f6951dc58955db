// Package rollout implements the `gradual_rollout` resource: Terraform glue around
// internal/delivery, which carries a revision to the picked clusters in verified waves.
package rollout

import (
	"context"

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
	ImportExample: "fleet/ingress", DefaultRecordNamespace: defaultRecordNamespace}

// New returns the resource.
func New() resource.Resource {
	r := &rolloutResource{}
	r.Ops, r.Kind = r, kind
	r.Failed = fleetresource.FailedCreate{Title: "Rollout Not Saved In State",
		Detail: "The rollout failed before it completed, so it is not saved in the Terraform state. Every change it made is recorded in the clusters; the next apply continues from those records instead of starting over."}
	return r
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
