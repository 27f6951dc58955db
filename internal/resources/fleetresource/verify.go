// verify.go: the `verify` attribute — how each cluster is verified after an apply —
// of the resources that apply through internal/delivery: its `timeout` and `bake_time`, their
// defaults, and their conversion into durations. Each resource keeps its own wording (the
// descriptions are part of its documentation) and may add attributes, as rollouts add
// `http_checks`.

package fleetresource

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// Defaults of `verify.timeout` and `verify.bake_time`.
const (
	DefaultVerifyTimeout = "5m"
	DefaultBakeTime      = "0s"
)

// VerifyDescriptions are a resource's wording of the attribute and of its two common attributes.
type VerifyDescriptions struct{ Verify, Timeout, BakeTime string }

// VerifyExtra is an attribute a resource adds to `verify`: its schema, type, and value when `verify`
// is left out.
type VerifyExtra struct {
	Name      string
	Attribute schema.Attribute
	Type      attr.Type
	Default   attr.Value
}

// VerifyAttrTypes are the attribute types of `verify` with extra.
func VerifyAttrTypes(extra ...VerifyExtra) map[string]attr.Type {
	out := map[string]attr.Type{"timeout": types.StringType, "bake_time": types.StringType}
	for _, e := range extra {
		out[e.Name] = e.Type
	}
	return out
}

// VerifyAttribute is the optional, computed `verify` attribute, defaulting to the default timeout and
// bake time (and the extras' defaults).
func VerifyAttribute(d VerifyDescriptions, extra ...VerifyExtra) schema.SingleNestedAttribute {
	defaults := map[string]attr.Value{"timeout": types.StringValue(DefaultVerifyTimeout), "bake_time": types.StringValue(DefaultBakeTime)}
	attrs := map[string]schema.Attribute{
		"timeout": schema.StringAttribute{
			Optional: true, Computed: true, Default: stringdefault.StaticString(DefaultVerifyTimeout),
			MarkdownDescription: d.Timeout,
			Validators:          []validator.String{Duration(time.Second, 0)},
		},
		"bake_time": schema.StringAttribute{
			Optional: true, Computed: true, Default: stringdefault.StaticString(DefaultBakeTime),
			MarkdownDescription: d.BakeTime,
			Validators:          []validator.String{Duration(0, 0)},
		},
	}
	for _, e := range extra {
		attrs[e.Name], defaults[e.Name] = e.Attribute, e.Default
	}
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		Default:             objectdefault.StaticValue(types.ObjectValueMust(VerifyAttrTypes(extra...), defaults)),
		MarkdownDescription: d.Verify,
		Attributes:          attrs,
	}
}

// VerifyAs reads a `verify` value into model (a struct with the attributes' tfsdk tags), leaving
// model as it is when the value is null or unknown — so model should hold the defaults.
func VerifyAs(ctx context.Context, v types.Object, model any) diag.Diagnostics {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	return v.As(ctx, model, basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true})
}

// VerifyDurations converts `verify.timeout` and `verify.bake_time`, each falling back to its default.
func VerifyDurations(timeout, bakeTime types.String) (verifyTimeout, bake time.Duration) {
	return ParseDuration(timeout, DefaultVerifyTimeout), ParseDuration(bakeTime, DefaultBakeTime)
}

// ParseDuration converts a duration attribute; null, unknown, empty or (though the validators
// refuse it) invalid values give fallback, so that an apply never runs with a zero timeout.
func ParseDuration(v types.String, fallback string) time.Duration {
	s := v.ValueString()
	if v.IsNull() || v.IsUnknown() || s == "" {
		s = fallback
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		d, _ = time.ParseDuration(fallback)
	}
	return d
}
