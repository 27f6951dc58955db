package fleetattr

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// ResourceNamespace is the `namespace` attribute for resources; changing it replaces the resource.
func ResourceNamespace() schema.StringAttribute {
	return schema.StringAttribute{
		Required:            true,
		MarkdownDescription: namespaceDescription + " Changing it replaces the resource.",
		Validators:          []validator.String{stringvalidator.LengthBetween(1, 63)},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
}

// ResourceSelector is the `selector` attribute for resources; namesAttr is the attribute it
// conflicts with.
func ResourceSelector(namesAttr string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: selectorDescription,
		Validators:          []validator.Object{objectvalidator.ConflictsWith(path.MatchRoot(namesAttr))},
		Attributes: map[string]schema.Attribute{
			"match_labels": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Labels the Cluster must carry, key to value.",
				Validators:          []validator.Map{mapvalidator.KeysAre(stringvalidator.LengthAtLeast(1))},
			},
			"match_expressions": schema.ListNestedAttribute{
				Optional:            true,
				MarkdownDescription: "Label requirements, all of which must hold.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"key": schema.StringAttribute{
						Required: true, MarkdownDescription: "Label key.",
						Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"operator": schema.StringAttribute{
						Required: true, MarkdownDescription: "One of `In`, `NotIn`, `Exists`, `DoesNotExist`.",
						Validators: []validator.String{stringvalidator.OneOf(Operators...)},
					},
					"values": schema.ListAttribute{
						Optional: true, ElementType: types.StringType,
						MarkdownDescription: "Values for `In` and `NotIn`; must be empty for `Exists` and `DoesNotExist`.",
					},
				}},
			},
		},
	}
}

// ResourceNames is the list-of-cluster-names attribute for resources.
func ResourceNames(description string) schema.ListAttribute {
	return schema.ListAttribute{
		Optional:            true,
		ElementType:         types.StringType,
		MarkdownDescription: description,
		Validators: []validator.List{
			listvalidator.UniqueValues(),
			listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1)),
		},
	}
}
