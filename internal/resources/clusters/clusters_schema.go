package clusters

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

func (d *dataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the Cluster API `Cluster` objects that a selector or a list of names picks in the management cluster, " +
			"with each cluster's readiness and `skip_reason`: why a rollout would skip it (not ready, paused, no kubeconfig Secret, " +
			"a kubeconfig without inline credentials: an exec plugin, local files or a proxy). Rollouts apply the same rules.",
		Attributes: map[string]schema.Attribute{
			"namespace": fleetresource.DataSourceNamespace(),
			"selector":  fleetresource.DataSourceSelector(),
			"names":     fleetresource.DataSourceNames(),
			"eligible_names": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Names of the picked clusters a rollout would change (empty `skip_reason`), sorted.",
			},
			"clusters": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "The picked clusters, sorted by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":                 schema.StringAttribute{Computed: true, MarkdownDescription: "Cluster name."},
					"namespace":            schema.StringAttribute{Computed: true, MarkdownDescription: "Cluster namespace."},
					"labels":               schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Cluster labels."},
					"phase":                schema.StringAttribute{Computed: true, MarkdownDescription: "`status.phase` as CAPI reports it (e.g. `Provisioned`)."},
					"control_plane_ready":  schema.BoolAttribute{Computed: true, MarkdownDescription: "The control plane is initialized (`status.initialization.controlPlaneInitialized`; `status.controlPlaneReady` on v1beta1)."},
					"infrastructure_ready": schema.BoolAttribute{Computed: true, MarkdownDescription: "The infrastructure is provisioned (`status.initialization.infrastructureProvisioned`; `status.infrastructureReady` on v1beta1)."},
					"kubeconfig_available": schema.BoolAttribute{Computed: true, MarkdownDescription: "The `<name>-kubeconfig` Secret exists with a `value` key."},
					"paused":               schema.BoolAttribute{Computed: true, MarkdownDescription: "`spec.paused` is true or the `cluster.x-k8s.io/paused` annotation is set."},
					"kubernetes_version":   schema.StringAttribute{Computed: true, MarkdownDescription: "Kubernetes version from `spec.topology.version`, else the control plane's single reported version; empty when unknown."},
					"skip_reason":          schema.StringAttribute{Computed: true, MarkdownDescription: "Why a rollout would skip this cluster; empty when it is eligible."},
					"eligible":             schema.BoolAttribute{Computed: true, MarkdownDescription: "True when `skip_reason` is empty."},
				}},
			},
		},
	}
}
