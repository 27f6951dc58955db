package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

var basetypesOpts = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

// storedConfig is the part of the configuration the management cluster's record keeps, so that
// `terraform import` can restore it. Field names are part of the record format.
type storedConfig struct {
	fleetresource.StoredManifests
	fleetresource.StoredSettings
	OnFailure   string            `json:"onFailure"`
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	Expressions []storedReq       `json:"matchExpressions,omitempty"`
	HasSelector bool              `json:"hasSelector,omitempty"`
	Clusters    []string          `json:"clusters,omitempty"` // the deprecated `clusters`
	HTTPChecks  []storedCheck     `json:"httpChecks,omitempty"`
	ignoreattr.Stored
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// Stages and PromoteUntil are `stages` and `promote_until`.
	Stages       []storedStage `json:"stages,omitempty"`
	PromoteUntil string        `json:"promoteUntil,omitempty"`
	// FollowJoins is follow_joins (nil when off), so that import restores it.
	FollowJoins *fleetresource.FollowJoins `json:"followJoins,omitempty"`
}

// storedReq is a fleet.Requirement as the records keep it (its JSON names are the format).
type storedReq struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

type storedCheck struct {
	URL            string `json:"url"`
	ExpectedStatus int64  `json:"expectedStatus"`
	Timeout        string `json:"timeout"`
}

// configRecord serializes the configuration for the records.
func (m *Model) configRecord(ctx context.Context) ([]byte, diag.Diagnostics) {
	var diags diag.Diagnostics
	c := storedConfig{
		StoredManifests: fleetresource.StoredManifests{Manifests: m.Manifests.ValueString(), Revision: m.Revision.ValueString()},
		StoredSettings: fleetresource.StoredSettings{
			UpdateLimit: m.UpdateLimit.ValueString(), MaxFailures: m.MaxFailures.ValueString(), MaxUnsettled: m.MaxUnsettled.ValueString(),
			DeletionPolicy: m.DeletionPolicy.ValueString(), ForceConflicts: m.ForceConflicts.ValueBool(),
			NoAdopt: !m.Adopt.IsNull() && !m.Adopt.ValueBool(), CanaryOptional: m.CanaryOptional.ValueBool(),
		},
		OnFailure: m.OnFailure.ValueString(),
	}
	diags.Append(m.SensitiveObjects.ElementsAs(ctx, &c.SensitiveObjects, true)...)
	var d diag.Diagnostics
	c.Flux, d = m.fluxSettings(ctx)
	diags.Append(d...)
	c.Stored, d = ignoreattr.Store(ctx, m.IgnoreFields, m.SensitivePaths)
	diags.Append(d...)
	c.DefaultNamespace = m.DefaultNamespace.ValueString()
	if !m.Selector.IsNull() {
		sel, d := fleetresource.ToLabelSelector(ctx, m.Selector)
		diags.Append(d...)
		c.HasSelector, c.MatchLabels = true, sel.MatchLabels
		for _, e := range sel.MatchExpressions {
			c.Expressions = append(c.Expressions, storedReq(e))
		}
	}
	diags.Append(m.Clusters.ElementsAs(ctx, &c.Clusters, true)...)
	diags.Append(m.Names.ElementsAs(ctx, &c.Names, true)...)
	diags.Append(m.Canary.ElementsAs(ctx, &c.Canary, true)...)
	c.StoredVerify, d = fleetresource.StoreVerify(ctx, m.Verify)
	diags.Append(d...)
	var verify VerifyModel
	diags.Append(m.Verify.As(ctx, &verify, basetypesOpts)...)
	var checks []HTTPCheckModel
	diags.Append(verify.HTTPChecks.ElementsAs(ctx, &checks, true)...)
	for _, ch := range checks {
		c.HTTPChecks = append(c.HTTPChecks, storedCheck{URL: ch.URL.ValueString(), ExpectedStatus: ch.ExpectedStatus.ValueInt64(), Timeout: ch.Timeout.ValueString()})
	}
	c.Values, d = m.values(ctx)
	diags.Append(d...)
	c.Stages, d = m.storedStages(ctx)
	diags.Append(d...)
	c.PromoteUntil = m.PromoteUntil.ValueString()
	c.FollowJoins, d = m.followJoins(ctx)
	diags.Append(d...)
	return fleetresource.EncodeRecord(c, diags)
}

// fromConfigRecord fills the configuration attributes from what the records kept.
func (m *Model) fromConfigRecord(ctx context.Context, raw []byte) diag.Diagnostics {
	var c storedConfig
	diags := fleetresource.DecodeRecord(raw, &c, "rollout")
	if diags.HasError() {
		return diags
	}
	m.Manifests = manifesttype.NullValue()
	if c.Manifests != "" {
		m.Manifests = manifesttype.NewValue(c.Manifests)
	}
	m.Sensitive = types.StringNull()
	m.Delivery = fleetresource.DeliveryValue(c.Flux)
	m.SensitiveObjects, _ = types.ListValueFrom(ctx, types.StringType, append([]string{}, c.SensitiveObjects...))
	m.CanaryOptional = types.BoolValue(c.CanaryOptional)
	if c.Revision != "" {
		m.Revision = types.StringValue(c.Revision)
	}
	m.UpdateLimit, m.MaxFailures, m.OnFailure = types.StringValue(c.UpdateLimit), types.StringValue(c.MaxFailures), types.StringValue(c.OnFailure)
	if c.MaxUnsettled != "" {
		m.MaxUnsettled = types.StringValue(c.MaxUnsettled)
	}
	m.DeletionPolicy, m.ForceConflicts = types.StringValue(c.DeletionPolicy), types.BoolValue(c.ForceConflicts)
	m.RetryInvalid = types.BoolValue(false)
	var d diag.Diagnostics
	m.IgnoreFields, m.SensitivePaths, d = c.RuleValues(ctx)
	diags.Append(d...)
	m.DefaultNamespace = types.StringNull()
	if c.DefaultNamespace != "" {
		m.DefaultNamespace = types.StringValue(c.DefaultNamespace)
	}
	m.Adopt = types.BoolValue(!c.NoAdopt)
	m.FollowJoins = c.FollowJoins.Value()
	m.Values, d = fleetresource.ValuesValue(ctx, c.Values)
	diags.Append(d...)
	m.Selector = types.ObjectNull(fleetresource.SelectorAttrTypes)
	if c.HasSelector {
		ls := fleet.LabelSelector{MatchLabels: c.MatchLabels}
		for _, e := range c.Expressions {
			ls.MatchExpressions = append(ls.MatchExpressions, fleet.Requirement(e))
		}
		m.Selector = fleetresource.FromLabelSelector(ctx, ls)
	}
	m.Clusters = stringListOrNull(ctx, c.Clusters)
	m.Names = stringListOrNull(ctx, c.Names)
	m.Canary = stringListOrNull(ctx, c.Canary)
	m.Stages = stagesValue(ctx, c.Stages)
	m.PromoteUntil = types.StringNull()
	if c.PromoteUntil != "" {
		m.PromoteUntil = types.StringValue(c.PromoteUntil)
	}
	checks := types.ListNull(types.ObjectType{AttrTypes: httpCheckAttrTypes})
	if len(c.HTTPChecks) > 0 {
		var vals []attr.Value
		for _, ch := range c.HTTPChecks {
			vals = append(vals, types.ObjectValueMust(httpCheckAttrTypes, map[string]attr.Value{
				"url": types.StringValue(ch.URL), "expected_status": types.Int64Value(ch.ExpectedStatus), "timeout": types.StringValue(ch.Timeout),
			}))
		}
		checks = types.ListValueMust(types.ObjectType{AttrTypes: httpCheckAttrTypes}, vals)
	}
	m.Verify = types.ObjectValueMust(verifyAttrTypes, c.VerifyAttributes(map[string]attr.Value{"http_checks": checks}))
	return diags
}

func stringListOrNull(ctx context.Context, xs []string) types.List {
	if xs == nil {
		return types.ListNull(types.StringType)
	}
	v, _ := types.ListValueFrom(ctx, types.StringType, xs)
	return v
}

// importConfig fills an imported rollout (only id, namespace and name are set) from the
// management cluster's record. (Not manifests: it is null when sensitive_manifests holds the
// whole bundle.) It reports whether it did.
func (r *rolloutResource) importConfig(ctx context.Context, state *Model, key records.Key, diags *diag.Diagnostics) bool {
	found := r.ImportedRecord(ctx, key, state.RecordNamespace.ValueString(), diags)
	if found == nil {
		return false
	}
	diags.Append(state.fromConfigRecord(ctx, found)...)
	if diags.HasError() {
		return false
	}
	if state.Revision.IsNull() {
		// Records written before they kept the revision: it is the manifests' own.
		if rev, err := manifest.Revision(state.Manifests.ValueString()); err == nil {
			state.Revision = types.StringValue(rev)
		}
	}
	return true
}
