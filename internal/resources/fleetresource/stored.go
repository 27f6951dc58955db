// stored.go: the part of the configuration record (what the management cluster keeps so that
// `terraform import` can restore a resource) that the rollout and the assignment share. Each
// resource embeds these in its own record type; encoding/json flattens embedded structs, so the
// records keep one flat object and read records written before these types existed. Only the
// order of the keys moved, which decoding ignores (the records compare a configuration by its
// hash only to skip rewriting an unchanged one).

package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
)

// StoredManifests is a bundle of manifests as the records keep it. Field names are part of the
// record format.
type StoredManifests struct {
	// Manifests is the public half only: sensitive_manifests is never written here (this record
	// is read back into Terraform state by import). Revision and SensitiveObjects say what the
	// sensitive half was, by hash and identity.
	Manifests        string   `json:"manifests"`
	Revision         string   `json:"revision,omitempty"`
	SensitiveObjects []string `json:"sensitiveObjects,omitempty"`
}

// StoredSettings are the settings both resources record alike. Field names are part of the
// record format; the fields added after the first records are omitted when unset, so that
// those records read as the defaults.
type StoredSettings struct {
	Names          []string `json:"names,omitempty"`
	Canary         []string `json:"canary,omitempty"`
	CanaryOptional bool     `json:"canaryOptional,omitempty"`
	UpdateLimit    string   `json:"updateLimit"`
	MaxFailures    string   `json:"maxFailures"`
	MaxUnsettled   string   `json:"maxUnsettled,omitempty"`
	StoredVerify
	DeletionPolicy string `json:"deletionPolicy"`
	ForceConflicts bool   `json:"forceConflicts,omitempty"`
	// NoAdopt is adopt = false (stored negated: records written before adopt existed adopt).
	NoAdopt bool `json:"noAdopt,omitempty"`
	// Values is `values` (delivery.Values' own JSON form), omitted when unset.
	Values *delivery.Values `json:"values,omitempty"`
	// Flux is `delivery.flux` (nil: direct, and records written before it existed), so that
	// import and the status data source read the records where that engine keeps them.
	Flux *delivery.FluxSettings `json:"flux,omitempty"`
}

// StoredVerify is what the records keep of the `verify` attributes both resources have.
type StoredVerify struct {
	VerifyTimeout  string          `json:"verifyTimeout"`
	BakeTime       string          `json:"bakeTime"`
	HealthChecks   []health.Rule   `json:"healthChecks,omitempty"`
	NoClusterGates bool            `json:"noClusterGates,omitempty"`
	NodeGate       *StoredNodeGate `json:"nodeGate,omitempty"`
	// CheckJob is verify.check_job, omitted when unset.
	CheckJob *StoredCheckJob `json:"checkJob,omitempty"`
}

// StoreVerify returns what the records keep of a resource's `verify` (its common attributes;
// a resource records its own additions itself).
func StoreVerify(ctx context.Context, verify types.Object) (StoredVerify, diag.Diagnostics) {
	a := verify.Attributes()
	str := func(name string) string {
		s, _ := a[name].(types.String)
		return s.ValueString()
	}
	gates, _ := a[ClusterGates.Name].(types.Bool)
	rules, _ := a[HealthChecks.Name].(types.List)
	nodeGate, _ := a[NodeGate.Name].(types.Object)
	checkJob, _ := a["check_job"].(types.Object)
	s := StoredVerify{VerifyTimeout: str("timeout"), BakeTime: str("bake_time"),
		NoClusterGates: !gates.IsNull() && !gates.IsUnknown() && !gates.ValueBool()}
	var diags, d diag.Diagnostics
	s.HealthChecks, d = HealthRules(ctx, rules)
	diags.Append(d...)
	s.NodeGate, d = StoreNodeGate(ctx, nodeGate)
	diags.Append(d...)
	s.CheckJob, d = StoreCheckJob(ctx, checkJob)
	diags.Append(d...)
	return s, diags
}

// VerifyAttributes are the common `verify` attributes as the record says, with a resource's own
// additions in extra.
func (s StoredVerify) VerifyAttributes(extra map[string]attr.Value) map[string]attr.Value {
	out := map[string]attr.Value{
		"timeout": types.StringValue(s.VerifyTimeout), "bake_time": types.StringValue(s.BakeTime),
		HealthChecks.Name: HealthValue(s.HealthChecks), ClusterGates.Name: types.BoolValue(!s.NoClusterGates),
		NodeGate.Name: s.NodeGate.Value(), "check_job": s.CheckJob.Value(),
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
