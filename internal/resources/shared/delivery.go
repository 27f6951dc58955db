package shared

import (
	"context"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// PathDelivery is `delivery`.
var PathDelivery = path.Root("delivery")

var (
	fluxAttrTypes     = map[string]attr.Type{"repository": types.StringType, "insecure": types.BoolType}
	deliveryAttrTypes = map[string]attr.Type{"flux": types.ObjectType{AttrTypes: fluxAttrTypes}}
)

// DeliveryValue is `delivery` for settings (null for direct delivery), as the records keep it.
func DeliveryValue(settings *delivery.FluxSettings) types.Object {
	if settings == nil {
		return types.ObjectNull(deliveryAttrTypes)
	}
	insecure := types.BoolNull()
	if settings.Insecure {
		insecure = types.BoolValue(true)
	}
	flux := types.ObjectValueMust(fluxAttrTypes, map[string]attr.Value{"repository": types.StringValue(settings.Repository), "insecure": insecure})
	return types.ObjectValueMust(deliveryAttrTypes, map[string]attr.Value{"flux": flux})
}

// DeliveryAttribute is `delivery`: which engine carries revisions to the clusters, shared by the
// rollout and the module assignment so that both take the same settings.
func DeliveryAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Which engine carries each revision to the clusters. Left out, the provider applies it itself " +
			"(server-side apply from where Terraform runs, with each cluster's kubeconfig Secret). With `flux`, the waves, canary, " +
			"failure budget, bake, invalid ledger and Lease stay in the provider, and Flux delivers: each revision is published " +
			"as an OCI artifact (tag = revision), and in the Cluster's namespace of the management cluster an `OCIRepository` " +
			"pinned by digest and a `Kustomization` per cluster (through the Cluster's `<name>-kubeconfig` Secret, `prune` and " +
			"`wait` on, `timeout` = `verify.timeout`) apply it. The provider then reads and writes only the management cluster " +
			"and the registry, and reads no Secret in the Clusters' namespace (a Cluster's eligibility comes from its status); " +
			"the per-cluster records live in the management cluster. Changing the engine replaces the resource.",
		PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
		Attributes: map[string]schema.Attribute{
			"flux": schema.SingleNestedAttribute{
				Required:            true,
				MarkdownDescription: "Deliver through Flux's source-controller and kustomize-controller running in the management cluster (their CRDs must be installed there: the plan checks).",
				Attributes: map[string]schema.Attribute{
					"repository": schema.StringAttribute{
						Required: true,
						MarkdownDescription: "OCI repository the revisions are published to, `oci://host[:port]/path`, without a tag: " +
							"each revision is a tag of it, and Flux pulls it by digest.",
						Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^oci://[^/]+/.+`), "must be oci://host/path")},
					},
					"insecure": schema.BoolAttribute{
						Optional:            true,
						MarkdownDescription: "Reach the registry over plain HTTP (this provider and source-controller). Default false.",
					},
				},
			},
		},
	}
}

// FluxSettings is `delivery.flux` (value) as the Flux engine takes it; nil for direct delivery
// (or while unknown).
func FluxSettings(ctx context.Context, value types.Object) (*delivery.FluxSettings, diag.Diagnostics) {
	if value.IsNull() || value.IsUnknown() {
		return nil, nil
	}
	var dm struct {
		Flux types.Object `tfsdk:"flux"`
	}
	diags := value.As(ctx, &dm, basetypes.ObjectAsOptions{})
	if diags.HasError() || dm.Flux.IsNull() || dm.Flux.IsUnknown() {
		return nil, diags
	}
	var fm struct {
		Repository types.String `tfsdk:"repository"`
		Insecure   types.Bool   `tfsdk:"insecure"`
	}
	diags.Append(dm.Flux.As(ctx, &fm, basetypes.ObjectAsOptions{})...)
	if diags.HasError() || fm.Repository.IsUnknown() {
		return nil, diags
	}
	s := &delivery.FluxSettings{Repository: fm.Repository.ValueString(), Insecure: fm.Insecure.ValueBool()}
	if err := s.Validate(); err != nil {
		diags.AddAttributeError(PathDelivery.AtName("flux").AtName("repository"), "Invalid Flux Repository", err.Error())
	}
	return s, diags
}
