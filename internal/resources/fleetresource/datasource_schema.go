package fleetresource

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// DataSourceNamespace is the `namespace` attribute for data sources.
func DataSourceNamespace() schema.StringAttribute {
	return schema.StringAttribute{
		Required:            true,
		MarkdownDescription: namespaceDescription,
		Validators:          namespaceValidators(),
	}
}

// DataSourceSelector is the `selector` attribute for data sources.
func DataSourceSelector() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: selectorDescription,
		Validators:          selectorValidators("names"),
		Attributes: map[string]schema.Attribute{
			"match_labels": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: matchLabelsDescription,
				Validators:          matchLabelsValidators(),
			},
			"match_expressions": schema.ListNestedAttribute{
				Optional:            true,
				MarkdownDescription: matchExpressionsDescription,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"key":      schema.StringAttribute{Required: true, MarkdownDescription: keyDescription, Validators: keyValidators()},
					"operator": schema.StringAttribute{Required: true, MarkdownDescription: operatorDescription, Validators: operatorValidators()},
					"values":   schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: valuesDescription},
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
		Validators:          namesValidators(),
	}
}
