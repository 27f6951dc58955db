package fleetresource

import (
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// ResourceNamespace is the `namespace` attribute for resources; changing it replaces the resource.
func ResourceNamespace() schema.StringAttribute {
	return schema.StringAttribute{
		Required:            true,
		MarkdownDescription: namespaceDescription + " Changing it replaces the resource.",
		Validators:          namespaceValidators(),
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
}

// ResourceSelector is the optional `selector` attribute for resources that can also pick
// clusters by name; namesAttrs are the attributes it conflicts with (`names`, and a deprecated
// alias).
func ResourceSelector(namesAttrs ...string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: selectorDescription,
		Validators:          selectorValidators(namesAttrs...),
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

// ExclusiveResourceSelector is the `selector` of resources that must say which clusters they
// pick: by labels, or by the names attribute namesAttr, exactly one of the two.
func ExclusiveResourceSelector(namesAttr string) schema.SingleNestedAttribute {
	s := ResourceSelector()
	s.Validators = []validator.Object{objectvalidator.ExactlyOneOf(path.MatchRoot(namesAttr))}
	s.MarkdownDescription = exclusiveSelectorDescription + " Exactly one of `selector` and `" + namesAttr + "` is required."
	return s
}

// ResourceNames is the list-of-cluster-names attribute for resources.
func ResourceNames(description string) schema.ListAttribute {
	return schema.ListAttribute{
		Optional:            true,
		ElementType:         types.StringType,
		MarkdownDescription: description + " " + emptyNamesDescription,
		Validators:          namesValidators(),
	}
}

// LabelSelector is an optional label selector attribute of the shape of `selector`
// (match_labels, match_expressions) with no validators of its own, for resources that pick
// other objects than Clusters by label, or check the choice between `selector` and `names`
// elsewhere.
func LabelSelector(description string) schema.SingleNestedAttribute {
	s := ResourceSelector()
	s.Validators = nil
	s.MarkdownDescription = description
	return s
}

// DNSLabel is a Kubernetes DNS label (RFC 1123): what a name that names records must be.
var DNSLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ResourceName is the `name` attribute of a resource that names its records: a DNS label whose
// change replaces the resource. description says what it names.
func ResourceName(description string) schema.StringAttribute {
	return schema.StringAttribute{
		Required:            true,
		MarkdownDescription: description,
		Validators:          []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(DNSLabel, "must be a DNS label: lower-case letters, digits and '-'")},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
}

// MaxFailuresAttribute is `max_failures`, defaulting to def; description says what it counts.
func MaxFailuresAttribute(def, description string) schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true, Computed: true, Default: stringdefault.StaticString(def),
		MarkdownDescription: description,
		Validators:          []validator.String{MaxFailures()},
	}
}

// MaxUnsettledAttribute is `max_unsettled` (MaxUnsettledDescription).
func MaxUnsettledAttribute() schema.StringAttribute {
	return schema.StringAttribute{
		Optional:            true,
		MarkdownDescription: MaxUnsettledDescription,
		Validators:          []validator.String{MaxUnsettledValidator()},
	}
}

// SkippedAttribute is `skipped`: the picked clusters an apply leaves alone, with the reason.
func SkippedAttribute(description string) schema.MapAttribute {
	return schema.MapAttribute{
		Computed: true, ElementType: types.StringType,
		MarkdownDescription: description,
	}
}
