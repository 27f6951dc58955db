package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// PathFollowJoins is `follow_joins` of gradual_rollout and gradual_module_assignment: the bridge
// for clusters that join between applies (internal/crsbridge).
var PathFollowJoins = path.Root("follow_joins")

// FollowJoinsAttrTypes are follow_joins' attributes.
var FollowJoinsAttrTypes = map[string]attr.Type{"labels": types.MapType{ElemType: types.StringType}}

// FollowJoinsAttribute is follow_joins with the resource's description.
func FollowJoinsAttribute(description string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, MarkdownDescription: description,
		Attributes: map[string]schema.Attribute{
			"labels": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Labels put on the bridge's ClusterResourceSet and ConfigMaps, e.g. " +
					"`\"cluster.x-k8s.io/watch-filter\" = \"<value>\"` when Cluster API's manager runs with `--watch-filter` (it then " +
					"reconciles only objects with that label, Clusters included).",
			},
		},
	}
}

// BridgeAttribute is the computed `bridge` that goes with follow_joins.
func BridgeAttribute(description string) schema.MapAttribute {
	return schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: description}
}

// FollowJoins is follow_joins as configured: on (with its labels) or off (nil).
type FollowJoins struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// FollowJoinsOf reads follow_joins (nil when off or unknown). Either engine can have it: the
// bridge is Cluster API's ClusterResourceSet controller, which reaches a joiner through its
// kubeconfig Secret whichever engine delivers to the members, and the apply that takes a joiner
// over delivers to it as to any member (through Flux: its Kustomization applies the same objects
// over what the bridge created).
func FollowJoinsOf(ctx context.Context, v types.Object) (*FollowJoins, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return nil, diags
	}
	var fj struct {
		Labels types.Map `tfsdk:"labels"`
	}
	diags.Append(v.As(ctx, &fj, basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true})...)
	out := &FollowJoins{}
	if !fj.Labels.IsNull() && !fj.Labels.IsUnknown() {
		diags.Append(fj.Labels.ElementsAs(ctx, &out.Labels, false)...)
	}
	return out, diags
}

// Value is follow_joins as the configuration that f was read (or stored) from wrote it.
func (f *FollowJoins) Value() types.Object {
	if f == nil {
		return types.ObjectNull(FollowJoinsAttrTypes)
	}
	labels := types.MapNull(types.StringType)
	if len(f.Labels) > 0 {
		vals := make(map[string]attr.Value, len(f.Labels))
		for k, v := range f.Labels {
			vals[k] = types.StringValue(v)
		}
		labels = types.MapValueMust(types.StringType, vals)
	}
	return types.ObjectValueMust(FollowJoinsAttrTypes, map[string]attr.Value{"labels": labels})
}

// BridgeValue is `bridge` from the revisions a bridge hands out.
func BridgeValue(ctx context.Context, revisions map[string]string) (types.Map, diag.Diagnostics) {
	return types.MapValueFrom(ctx, types.StringType, revisions)
}
