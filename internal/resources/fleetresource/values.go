package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// PathValues is the `values` attribute of the resources that render their manifests per
// cluster.
var PathValues = path.Root("values")

// ValuesText is what a resource says in the `values` description it shares with the others:
// the one definition of the attribute says the rules, each resource only what is templated.
type ValuesText struct {
	// Template names what `values` makes a template, as the start of a sentence ("`manifests`
	// and `sensitive_manifests` are a template").
	Template string
	// Extra is said after the rules (e.g. how a mode changes them); "" for nothing.
	Extra string
}

// ValuesAttribute is `values`: where each cluster's substitution variables come from
// (delivery.Values), for every resource that renders its manifests per cluster.
func ValuesAttribute(text ValuesText) schema.SingleNestedAttribute {
	description := "Per-cluster values. When set, " + text.Template + " rendered for each " +
		"cluster the way Flux's `postBuild.substitute` does it (the same library, strict): `${var}`, `${var:=default}` and the " +
		"other bash forms, `$${var}` for a literal `${var}`, objects labelled or annotated " +
		"`kustomize.toolkit.fluxcd.io/substitute: disabled` left as written, so one bundle serves both engines. As in Flux, " +
		"each object is written as YAML before substitution, so a value that reads as a number or boolean becomes one. " +
		"Every cluster has `cluster_name` and `cluster_namespace`, and its ClusterClass variables " +
		"(`spec.topology.variables`) by name (a string's content, other values as JSON). For one cluster, later sources win: " +
		"topology variables, `from_labels`, `from_annotations`, the `selected` entries that match (in order), then `clusters`. " +
		"A variable used without a default that a cluster does not get fails the plan, naming the cluster and the variable; " +
		"nothing is applied. Terraform interpolates `${` in its own strings: in a heredoc write `$${var}` " +
		"(manifests read with `file()` need no escaping). The template and these rules name the `revision` (a change here is a new revision, rolled out in " +
		"waves); a change on a Cluster (a label it takes a value from) changes that cluster only: the refresh finds it " +
		"`values-changed` in `summary` and `attention`, and the plan updates it alone. Without `values`, nothing is substituted."
	if text.Extra != "" {
		description += " " + text.Extra
	}
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: description,
		Attributes: map[string]schema.Attribute{
			"from_labels": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Variable name → Cluster label key: the variable takes the label's value (e.g. `{ region = \"topology.kubernetes.io/region\" }`). A Cluster without the label leaves it unset.",
				Validators:          []validator.Map{mapvalidator.SizeAtLeast(1)},
			},
			"from_annotations": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Variable name → Cluster annotation key, as `from_labels`.",
				Validators:          []validator.Map{mapvalidator.SizeAtLeast(1)},
			},
			"selected": schema.ListNestedAttribute{
				Optional:            true,
				MarkdownDescription: "Variables for the clusters whose labels include `match_labels`; later entries win.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"match_labels": schema.MapAttribute{Required: true, ElementType: types.StringType,
						MarkdownDescription: "Labels a Cluster must have (all of them)."},
					"values": schema.MapAttribute{Required: true, ElementType: types.StringType,
						MarkdownDescription: "Variable name → value."},
				}},
			},
			"clusters": schema.MapAttribute{
				Optional: true, ElementType: types.MapType{ElemType: types.StringType},
				MarkdownDescription: "Cluster name → (variable name → value): variables for one cluster, over every other source.",
			},
		},
	}
}

// valuesModel is the `values` attribute.
type valuesModel struct {
	FromLabels      map[string]string            `tfsdk:"from_labels"`
	FromAnnotations map[string]string            `tfsdk:"from_annotations"`
	Selected        []selectedValuesModel        `tfsdk:"selected"`
	Clusters        map[string]map[string]string `tfsdk:"clusters"`
}

type selectedValuesModel struct {
	MatchLabels map[string]string `tfsdk:"match_labels"`
	Values      map[string]string `tfsdk:"values"`
}

var selectedValuesAttrTypes = map[string]attr.Type{
	"match_labels": types.MapType{ElemType: types.StringType},
	"values":       types.MapType{ElemType: types.StringType},
}

// ValuesAttrTypes are the attribute types of `values`.
var ValuesAttrTypes = map[string]attr.Type{
	"from_labels":      types.MapType{ElemType: types.StringType},
	"from_annotations": types.MapType{ElemType: types.StringType},
	"selected":         types.ListType{ElemType: types.ObjectType{AttrTypes: selectedValuesAttrTypes}},
	"clusters":         types.MapType{ElemType: types.MapType{ElemType: types.StringType}},
}

// Values converts `values` (nil when not set or not known yet), checking every variable name
// it gives (delivery.Values.Validate) against the attribute.
func Values(ctx context.Context, v types.Object) (*delivery.Values, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var vm valuesModel
	diags := v.As(ctx, &vm, basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true})
	if diags.HasError() {
		return nil, diags
	}
	out := &delivery.Values{FromLabels: vm.FromLabels, FromAnnotations: vm.FromAnnotations, Clusters: vm.Clusters}
	for _, s := range vm.Selected {
		out.Selected = append(out.Selected, delivery.SelectedValues{MatchLabels: s.MatchLabels, Values: s.Values})
	}
	if err := out.Validate(); err != nil {
		diags.AddAttributeError(PathValues, "Invalid Values", err.Error())
		return nil, diags
	}
	return out, diags
}

// ValuesKnown reports whether `values` is known all through (a value from another resource
// may be known only at apply).
func ValuesKnown(ctx context.Context, v types.Object) bool {
	tv, err := v.ToTerraformValue(ctx)
	return err == nil && tv.IsFullyKnown()
}

// ValuesValue is v as the `values` attribute (null for nil), for import.
func ValuesValue(ctx context.Context, v *delivery.Values) (types.Object, diag.Diagnostics) {
	if v == nil {
		return types.ObjectNull(ValuesAttrTypes), nil
	}
	vm := valuesModel{FromLabels: v.FromLabels, FromAnnotations: v.FromAnnotations, Clusters: v.Clusters}
	for _, s := range v.Selected {
		vm.Selected = append(vm.Selected, selectedValuesModel{MatchLabels: s.MatchLabels, Values: s.Values})
	}
	return types.ObjectValueFrom(ctx, ValuesAttrTypes, vm)
}
