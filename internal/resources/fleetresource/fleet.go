// fleet.go: the schema attributes and models that pick clusters — namespace,
// selector, names — shared by the provider's resources and data sources.

package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// SelectorModel is the `selector` attribute.
type SelectorModel struct {
	MatchLabels      types.Map  `tfsdk:"match_labels"`
	MatchExpressions types.List `tfsdk:"match_expressions"`
}

// RequirementModel is one entry of `selector.match_expressions`.
type RequirementModel struct {
	Key      types.String `tfsdk:"key"`
	Operator types.String `tfsdk:"operator"`
	Values   types.List   `tfsdk:"values"`
}

// Operators are the label selector operators, as in Kubernetes.
var Operators = []string{"In", "NotIn", "Exists", "DoesNotExist"}

// RequirementAttrTypes are the attribute types of a RequirementModel.
var RequirementAttrTypes = map[string]attr.Type{
	"key":      types.StringType,
	"operator": types.StringType,
	"values":   types.ListType{ElemType: types.StringType},
}

// ToLabelSelector converts the model into fleet's selector shape. A null selector selects all.
func ToLabelSelector(ctx context.Context, obj types.Object) (fleet.LabelSelector, diag.Diagnostics) {
	var diags diag.Diagnostics
	var out fleet.LabelSelector
	if obj.IsNull() || obj.IsUnknown() {
		return out, diags
	}
	var model SelectorModel
	diags.Append(obj.As(ctx, &model, basetypes.ObjectAsOptions{})...)
	if diags.HasError() {
		return out, diags
	}
	if !model.MatchLabels.IsNull() {
		diags.Append(model.MatchLabels.ElementsAs(ctx, &out.MatchLabels, false)...)
	}
	if !model.MatchExpressions.IsNull() {
		var reqs []RequirementModel
		diags.Append(model.MatchExpressions.ElementsAs(ctx, &reqs, false)...)
		for _, r := range reqs {
			req := fleet.Requirement{Key: r.Key.ValueString(), Operator: r.Operator.ValueString()}
			if !r.Values.IsNull() {
				diags.Append(r.Values.ElementsAs(ctx, &req.Values, false)...)
			}
			out.MatchExpressions = append(out.MatchExpressions, req)
		}
	}
	return out, diags
}

// SelectorAttrTypes are the attribute types of a SelectorModel.
var SelectorAttrTypes = map[string]attr.Type{
	"match_labels":      types.MapType{ElemType: types.StringType},
	"match_expressions": types.ListType{ElemType: types.ObjectType{AttrTypes: RequirementAttrTypes}},
}

// FromLabelSelector is the `selector` attribute value of ls (the reverse of ToLabelSelector), for
// resources that restore their configuration from records on import.
func FromLabelSelector(ctx context.Context, ls fleet.LabelSelector) types.Object {
	labels := types.MapNull(types.StringType)
	if ls.MatchLabels != nil {
		labels, _ = types.MapValueFrom(ctx, types.StringType, ls.MatchLabels)
	}
	exprs := types.ListNull(types.ObjectType{AttrTypes: RequirementAttrTypes})
	if ls.MatchExpressions != nil {
		var vals []attr.Value
		for _, e := range ls.MatchExpressions {
			values := types.ListNull(types.StringType)
			if e.Values != nil {
				values, _ = types.ListValueFrom(ctx, types.StringType, e.Values)
			}
			vals = append(vals, types.ObjectValueMust(RequirementAttrTypes, map[string]attr.Value{
				"key": types.StringValue(e.Key), "operator": types.StringValue(e.Operator), "values": values,
			}))
		}
		exprs = types.ListValueMust(types.ObjectType{AttrTypes: RequirementAttrTypes}, vals)
	}
	return types.ObjectValueMust(SelectorAttrTypes, map[string]attr.Value{"match_labels": labels, "match_expressions": exprs})
}

// Query converts the cluster-picking attributes of a resource into fleet's query: namespace,
// selector and, where the resource has them, names (null when it has none). A selector fleet
// cannot use is reported against `selector`.
func Query(ctx context.Context, namespace types.String, selector types.Object, names types.List) (fleet.Query, diag.Diagnostics) {
	q := fleet.Query{Namespace: namespace.ValueString()}
	ls, diags := ToLabelSelector(ctx, selector)
	if diags.HasError() {
		return q, diags
	}
	sel, err := ls.Selector()
	if err != nil {
		diags.AddAttributeError(path.Root("selector"), "Invalid Selector", err.Error())
		return q, diags
	}
	q.Selector = sel
	if !names.IsNull() && !names.IsUnknown() {
		diags.Append(names.ElementsAs(ctx, &q.Names, false)...)
	}
	return q, diags
}
