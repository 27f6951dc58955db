// Package manifesttype is the Terraform type of `manifests` attributes: a string of
// multi-document YAML whose meaning is its revision. Two texts with the same revision (they differ
// only in whitespace, key order, comments or document separators) are semantically equal, so a
// formatting-only edit plans no update: the framework keeps the prior text, and nothing is applied.
package manifesttype

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

var (
	_ basetypes.StringTypable                    = Type{}
	_ basetypes.StringValuableWithSemanticEquals = Value{}
)

// Type is the attribute type (CustomType) of a `manifests` string.
type Type struct {
	basetypes.StringType
}

// String names the type in framework errors.
func (t Type) String() string { return "manifesttype.Type" }

// Equal is true for another Type only: a plain string is a different type.
func (t Type) Equal(o attr.Type) bool {
	_, ok := o.(Type)
	return ok
}

// ValueType is the value this type produces.
func (t Type) ValueType(context.Context) attr.Value { return Value{} }

// ValueFromString wraps a framework string.
func (t Type) ValueFromString(_ context.Context, in basetypes.StringValue) (basetypes.StringValuable, diag.Diagnostics) {
	return Value{StringValue: in}, nil
}

// ValueFromTerraform decodes the wire value as a string and wraps it.
func (t Type) ValueFromTerraform(ctx context.Context, in tftypes.Value) (attr.Value, error) {
	v, err := t.StringType.ValueFromTerraform(ctx, in)
	if err != nil {
		return nil, err
	}
	s, ok := v.(basetypes.StringValue)
	if !ok {
		return nil, fmt.Errorf("unexpected value type %T", v)
	}
	return Value{StringValue: s}, nil
}

// Value is a `manifests` string.
type Value struct {
	basetypes.StringValue
}

// NewValue is a known manifests text.
func NewValue(text string) Value { return Value{StringValue: basetypes.NewStringValue(text)} }

// NullValue is an absent manifests text.
func NullValue() Value { return Value{StringValue: basetypes.NewStringNull()} }

// Type of the value.
func (v Value) Type(context.Context) attr.Type { return Type{} }

// Equal is exact (byte-for-byte) equality, as the framework requires of Equal; semantic equality
// is StringSemanticEquals.
func (v Value) Equal(o attr.Value) bool {
	other, ok := o.(Value)
	return ok && v.StringValue.Equal(other.StringValue)
}

// StringSemanticEquals reports whether the new text names the same revision as this (prior) one.
// A text that does not parse is never equal to anything: the validators report it, and the
// framework must not hide the edit behind the prior text.
func (v Value) StringSemanticEquals(_ context.Context, newValuable basetypes.StringValuable) (bool, diag.Diagnostics) {
	var diags diag.Diagnostics
	newValue, ok := newValuable.(Value)
	if !ok {
		diags.AddError("Semantic Equality Check Error",
			fmt.Sprintf("An unexpected value type was received while comparing manifests: %T. Please report this to the provider developers.", newValuable))
		return false, diags
	}
	if v.ValueString() == newValue.ValueString() {
		return true, diags
	}
	return SameRevision(v.ValueString(), newValue.ValueString()), diags
}

// SameRevision reports whether two manifests texts parse and name the same revision.
func SameRevision(a, b string) bool {
	ra, err := manifest.Revision(a)
	if err != nil {
		return false
	}
	rb, err := manifest.Revision(b)
	return err == nil && ra == rb
}
