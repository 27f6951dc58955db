package fleetattr

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

const (
	namespaceDescription = "Namespace of the Cluster API `Cluster` objects in the management cluster."
	selectorDescription  = "Label selector over the `Cluster` objects, as in Kubernetes: `match_labels` and `match_expressions` are ANDed. Conflicts with `names`. With neither, every Cluster in the namespace is picked."
	namesDescription     = "Names of the `Cluster` objects to pick. Conflicts with `selector`. Names that do not exist give a warning."
)

// DataSourceNamespace is the `namespace` attribute for data sources.
func DataSourceNamespace() schema.StringAttribute {
	return schema.StringAttribute{
		Required:            true,
		MarkdownDescription: namespaceDescription,
		Validators:          []validator.String{stringvalidator.LengthBetween(1, 63)},
	}
}

// DataSourceSelector is the `selector` attribute for data sources.
func DataSourceSelector() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: selectorDescription,
		Validators:          []validator.Object{objectvalidator.ConflictsWith(path.MatchRoot("names"))},
		Attributes: map[string]schema.Attribute{
			"match_labels": schema.MapAttribute{
				Optional:            true,
				ElementType:         types.StringType,
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

// DataSourceNames is the `names` attribute for data sources.
func DataSourceNames() schema.ListAttribute {
	return schema.ListAttribute{
		Optional:            true,
		ElementType:         types.StringType,
		MarkdownDescription: namesDescription,
		Validators: []validator.List{
			listvalidator.UniqueValues(),
			listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1)),
		},
	}
}
