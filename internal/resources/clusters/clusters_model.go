package clusters

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// Model is the data source's configuration and result.
type Model struct {
	Namespace     types.String `tfsdk:"namespace"`
	Selector      types.Object `tfsdk:"selector"`
	Names         types.List   `tfsdk:"names"`
	Clusters      types.List   `tfsdk:"clusters"`
	EligibleNames types.List   `tfsdk:"eligible_names"`
}

// ClusterModel is one entry of `clusters`.
type ClusterModel struct {
	Name                types.String `tfsdk:"name"`
	Namespace           types.String `tfsdk:"namespace"`
	Labels              types.Map    `tfsdk:"labels"`
	Phase               types.String `tfsdk:"phase"`
	ControlPlaneReady   types.Bool   `tfsdk:"control_plane_ready"`
	InfrastructureReady types.Bool   `tfsdk:"infrastructure_ready"`
	KubeconfigAvailable types.Bool   `tfsdk:"kubeconfig_available"`
	Paused              types.Bool   `tfsdk:"paused"`
	KubernetesVersion   types.String `tfsdk:"kubernetes_version"`
	SkipReason          types.String `tfsdk:"skip_reason"`
	Eligible            types.Bool   `tfsdk:"eligible"`
}

var clusterAttrTypes = map[string]attr.Type{
	"name":                 types.StringType,
	"namespace":            types.StringType,
	"labels":               types.MapType{ElemType: types.StringType},
	"phase":                types.StringType,
	"control_plane_ready":  types.BoolType,
	"infrastructure_ready": types.BoolType,
	"kubeconfig_available": types.BoolType,
	"paused":               types.BoolType,
	"kubernetes_version":   types.StringType,
	"skip_reason":          types.StringType,
	"eligible":             types.BoolType,
}

func (m *Model) fill(ctx context.Context, found *fleet.Discovery) diag.Diagnostics {
	var diags diag.Diagnostics
	entries := make([]ClusterModel, 0, len(found.Clusters))
	for _, c := range found.Clusters {
		labels, d := types.MapValueFrom(ctx, types.StringType, nonNil(c.Labels))
		diags.Append(d...)
		entries = append(entries, ClusterModel{
			Name:                types.StringValue(c.Name),
			Namespace:           types.StringValue(c.Namespace),
			Labels:              labels,
			Phase:               types.StringValue(c.Phase),
			ControlPlaneReady:   types.BoolValue(c.ControlPlaneReady),
			InfrastructureReady: types.BoolValue(c.InfrastructureReady),
			KubeconfigAvailable: types.BoolValue(c.KubeconfigAvailable),
			Paused:              types.BoolValue(c.Paused),
			KubernetesVersion:   types.StringValue(c.KubernetesVersion),
			SkipReason:          types.StringValue(c.SkipReason),
			Eligible:            types.BoolValue(c.Eligible()),
		})
	}
	var d diag.Diagnostics
	m.Clusters, d = types.ListValueFrom(ctx, types.ObjectType{AttrTypes: clusterAttrTypes}, entries)
	diags.Append(d...)
	m.EligibleNames, d = types.ListValueFrom(ctx, types.StringType, eligibleNames(found))
	diags.Append(d...)
	return diags
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
