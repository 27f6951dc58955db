package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
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
	// Manifests is the public half only: sensitive_manifests is never written here (this record
	// is read back into Terraform state by import). Revision and SensitiveObjects say what the
	// sensitive half was, by hash and identity.
	Manifests string `json:"manifests"`
	// Flux is `delivery.flux` (nil: direct), so that import and the status data source read
	// the records where the engine keeps them.
	Flux             *delivery.FluxSettings        `json:"flux,omitempty"`
	Revision         string                        `json:"revision,omitempty"`
	SensitiveObjects []string                      `json:"sensitiveObjects,omitempty"`
	CanaryOptional   bool                          `json:"canaryOptional,omitempty"`
	MatchLabels      map[string]string             `json:"matchLabels,omitempty"`
	Expressions      []storedReq                   `json:"matchExpressions,omitempty"`
	HasSelector      bool                          `json:"hasSelector,omitempty"`
	Clusters         []string                      `json:"clusters,omitempty"` // the deprecated `clusters`
	Names            []string                      `json:"names,omitempty"`
	Canary           []string                      `json:"canary,omitempty"`
	UpdateLimit      string                        `json:"updateLimit"`
	MaxFailures      string                        `json:"maxFailures"`
	MaxUnsettled     string                        `json:"maxUnsettled,omitempty"`
	OnFailure        string                        `json:"onFailure"`
	VerifyTimeout    string                        `json:"verifyTimeout"`
	BakeTime         string                        `json:"bakeTime"`
	HTTPChecks       []storedCheck                 `json:"httpChecks,omitempty"`
	HealthChecks     []health.Rule                 `json:"healthChecks,omitempty"`
	NoClusterGates   bool                          `json:"noClusterGates,omitempty"`
	NodeGate         *fleetresource.StoredNodeGate `json:"nodeGate,omitempty"`
	CheckJob         *fleetresource.StoredCheckJob `json:"checkJob,omitempty"`
	DeletionPolicy   string                        `json:"deletionPolicy"`
	ForceConflicts   bool                          `json:"forceConflicts,omitempty"`
	IgnoreFields     []ignoreattr.Rule             `json:"ignoreFields,omitempty"`
	SensitivePaths   []ignoreattr.Rule             `json:"sensitivePaths,omitempty"`
	DefaultNamespace string                        `json:"defaultNamespace,omitempty"`
	// NoAdopt is adopt = false (stored negated: records written before adopt existed adopt).
	NoAdopt bool `json:"noAdopt,omitempty"`
	// Values is `values` (delivery.Values' own JSON form).
	Values *delivery.Values `json:"values,omitempty"`
	// Stages and PromoteUntil are `stages` and `promote_until`.
	Stages       []storedStage `json:"stages,omitempty"`
	PromoteUntil string        `json:"promoteUntil,omitempty"`
}

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
		Manifests: m.Manifests.ValueString(), UpdateLimit: m.UpdateLimit.ValueString(), MaxFailures: m.MaxFailures.ValueString(), MaxUnsettled: m.MaxUnsettled.ValueString(),
		OnFailure: m.OnFailure.ValueString(), DeletionPolicy: m.DeletionPolicy.ValueString(), ForceConflicts: m.ForceConflicts.ValueBool(),
		NoAdopt:  !m.Adopt.IsNull() && !m.Adopt.ValueBool(),
		Revision: m.Revision.ValueString(), CanaryOptional: m.CanaryOptional.ValueBool(),
	}
	diags.Append(m.SensitiveObjects.ElementsAs(ctx, &c.SensitiveObjects, true)...)
	var d diag.Diagnostics
	c.Flux, d = m.fluxSettings(ctx)
	diags.Append(d...)
	rules, d := ignoreattr.Rules(ctx, m.IgnoreFields)
	diags.Append(d...)
	c.IgnoreFields = rules
	c.SensitivePaths, d = ignoreattr.Rules(ctx, m.SensitivePaths)
	diags.Append(d...)
	c.DefaultNamespace = m.DefaultNamespace.ValueString()
	if !m.Selector.IsNull() {
		var sel struct {
			MatchLabels      map[string]string `tfsdk:"match_labels"`
			MatchExpressions []struct {
				Key      string   `tfsdk:"key"`
				Operator string   `tfsdk:"operator"`
				Values   []string `tfsdk:"values"`
			} `tfsdk:"match_expressions"`
		}
		diags.Append(m.Selector.As(ctx, &sel, basetypesOpts)...)
		c.HasSelector, c.MatchLabels = true, sel.MatchLabels
		for _, e := range sel.MatchExpressions {
			c.Expressions = append(c.Expressions, storedReq{Key: e.Key, Operator: e.Operator, Values: e.Values})
		}
	}
	diags.Append(m.Clusters.ElementsAs(ctx, &c.Clusters, true)...)
	diags.Append(m.Names.ElementsAs(ctx, &c.Names, true)...)
	diags.Append(m.Canary.ElementsAs(ctx, &c.Canary, true)...)
	var verify VerifyModel
	diags.Append(m.Verify.As(ctx, &verify, basetypesOpts)...)
	c.VerifyTimeout, c.BakeTime = verify.Timeout.ValueString(), verify.BakeTime.ValueString()
	var checks []HTTPCheckModel
	diags.Append(verify.HTTPChecks.ElementsAs(ctx, &checks, true)...)
	for _, ch := range checks {
		c.HTTPChecks = append(c.HTTPChecks, storedCheck{URL: ch.URL.ValueString(), ExpectedStatus: ch.ExpectedStatus.ValueInt64(), Timeout: ch.Timeout.ValueString()})
	}
	healthRules, d := fleetresource.HealthRules(ctx, verify.HealthChecks)
	diags.Append(d...)
	c.HealthChecks = healthRules
	c.NoClusterGates = !verify.ClusterGates.IsNull() && !verify.ClusterGates.IsUnknown() && !verify.ClusterGates.ValueBool()
	c.NodeGate, d = fleetresource.StoreNodeGate(ctx, verify.NodeGate)
	diags.Append(d...)
	c.CheckJob, d = fleetresource.StoreCheckJob(ctx, verify.CheckJob)
	diags.Append(d...)
	values, d := m.values(ctx)
	diags.Append(d...)
	c.Values = values
	c.Stages, d = m.storedStages(ctx)
	diags.Append(d...)
	c.PromoteUntil = m.PromoteUntil.ValueString()
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
	m.IgnoreFields, d = ignoreattr.Value(ctx, c.IgnoreFields)
	diags.Append(d...)
	m.SensitivePaths, d = ignoreattr.Value(ctx, c.SensitivePaths)
	m.DefaultNamespace = types.StringNull()
	if c.DefaultNamespace != "" {
		m.DefaultNamespace = types.StringValue(c.DefaultNamespace)
	}
	diags.Append(d...)
	m.Adopt = types.BoolValue(!c.NoAdopt)
	m.Values, d = fleetresource.ValuesValue(ctx, c.Values)
	diags.Append(d...)
	m.Selector = types.ObjectNull(fleetresource.SelectorAttrTypes)
	if c.HasSelector {
		ls := fleet.LabelSelector{MatchLabels: c.MatchLabels}
		for _, e := range c.Expressions {
			ls.MatchExpressions = append(ls.MatchExpressions, fleet.Requirement{Key: e.Key, Operator: e.Operator, Values: e.Values})
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
	m.Verify = types.ObjectValueMust(verifyAttrTypes, map[string]attr.Value{
		"timeout": types.StringValue(c.VerifyTimeout), "bake_time": types.StringValue(c.BakeTime), "http_checks": checks,
		"health_checks": fleetresource.HealthValue(c.HealthChecks), "cluster_gates": types.BoolValue(!c.NoClusterGates),
		"node_gate": c.NodeGate.Value(), "check_job": c.CheckJob.Value(),
	})
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
