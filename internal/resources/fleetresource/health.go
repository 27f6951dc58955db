// health.go: `verify.health_checks`, CEL expressions that judge the applied objects of chosen
// kinds instead of kstatus (internal/health, Flux's healthCheckExprs): the attribute, its
// plan-time validation, and its conversion into a health.Checker.

package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
)

// HealthCheckAttrTypes are the attribute types of one `verify.health_checks` entry.
var HealthCheckAttrTypes = map[string]attr.Type{
	"api_version": types.StringType, "kind": types.StringType,
	"current": types.StringType, "failed": types.StringType, "in_progress": types.StringType,
}

// HealthCheckModel is one `verify.health_checks` entry.
type HealthCheckModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Kind       types.String `tfsdk:"kind"`
	Current    types.String `tfsdk:"current"`
	Failed     types.String `tfsdk:"failed"`
	InProgress types.String `tfsdk:"in_progress"`
}

// PathHealthChecks is `verify.health_checks`.
var PathHealthChecks = path.Root("verify").AtName("health_checks")

// HealthChecks is the `verify.health_checks` attribute, the same for every resource that
// verifies through internal/delivery.
var HealthChecks = VerifyExtra{
	Name:    "health_checks",
	Type:    types.ListType{ElemType: types.ObjectType{AttrTypes: HealthCheckAttrTypes}},
	Default: types.ListNull(types.ObjectType{AttrTypes: HealthCheckAttrTypes}),
	Attribute: schema.ListNestedAttribute{
		Optional: true,
		MarkdownDescription: "Health expressions in [CEL](https://cel.dev), per `api_version` and `kind`, evaluated as Flux's Kustomization " +
			"`healthCheckExprs` are (the order and the in-progress rules below): an applied object of a listed kind (matched by API " +
			"group and kind, whatever its version) is judged by them instead of kstatus. Delivering directly, the provider evaluates " +
			"them as it waits; with `delivery.flux` they become each cluster's Kustomization's `healthCheckExprs`, evaluated in the " +
			"management cluster by kustomize-controller, which reports a failed one as `HealthCheckFailed`. Both judge with Flux's own " +
			"library (the provider links `fluxcd/pkg/runtime/cel`, kustomize-controller's: one CEL environment, with CEL's standard " +
			"functions, optional types, the `strings`, `sets` and encoders extensions, cross-type numeric comparisons), so an " +
			"expression means the same on both. The plan is stricter than Flux: it refuses a variable Kubernetes objects do not " +
			"have at the top level (e.g. `self`) and an expression whose result cannot be a bool. " +
			"The expressions read the live object's top-level fields (`metadata`, `spec`, `status`, `data`, …), e.g. " +
			"`status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')`. An object whose " +
			"`status.observedGeneration` differs from `metadata.generation` is in progress; otherwise `in_progress`, `failed` and " +
			"`current` are evaluated in that order and the first that is true decides, none true meaning in progress. An " +
			"expression that reads a field the object lacks cannot be evaluated yet, which also counts as in progress: guard " +
			"such fields with `has()` or `status.?field`. `failed` true fails the cluster at once, naming the object and the " +
			"expression; `current` not true within `verify.timeout` fails it as a timeout naming the object. Either is a " +
			"failure of the revision: the cluster is restored and the revision recorded invalid. The expressions judge the " +
			"new revision only; a restored backup is verified by kstatus. An expression that does not compile, or does not " +
			"give a bool, fails the plan.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"api_version": schema.StringAttribute{Required: true, MarkdownDescription: "The objects' `apiVersion`, e.g. `apps/v1`."},
			"kind":        schema.StringAttribute{Required: true, MarkdownDescription: "The objects' `kind`, e.g. `Deployment`."},
			"current": schema.StringAttribute{
				Required: true, MarkdownDescription: "CEL expression true when the object is healthy.",
				Validators: []validator.String{CEL()},
			},
			"failed": schema.StringAttribute{
				Optional: true, MarkdownDescription: "CEL expression true when the object has failed: the wait stops and the cluster fails.",
				Validators: []validator.String{CEL()},
			},
			"in_progress": schema.StringAttribute{
				Optional: true, MarkdownDescription: "CEL expression true while the object is still progressing, evaluated first.",
				Validators: []validator.String{CEL()},
			},
		}},
	},
}

// ClusterGates is the `verify.cluster_gates` attribute.
var ClusterGates = VerifyExtra{
	Name:    "cluster_gates",
	Type:    types.BoolType,
	Default: types.BoolValue(true),
	Attribute: schema.BoolAttribute{
		Optional: true, Computed: true, Default: booldefault.StaticBool(true),
		MarkdownDescription: "Re-read each cluster's own health right before its wave starts and each time its change is verified " +
			"(after the apply and after `bake_time`): the Cluster's `Available` condition in the management cluster and, delivering " +
			"directly, the `Ready` condition of the workload cluster's Nodes. The gate judges change, not state: what it reads after " +
			"the change is compared with what it read before. `Available` `True` before and not after, or a Node `Ready` before whose " +
			"kubelet reports `Ready` `False` after (see `node_gate` for which Nodes count and how many may be unready), fails the " +
			"cluster with the gate and the evidence named (a failure of the revision: restored, recorded invalid, counted against " +
			"`max_failures`). Nodes that join, are cordoned, drained, deleted, replaced or lost during the wave are not blamed on the " +
			"revision; the apply's warnings name them. A cluster already unhealthy when its wave starts is skipped with the reason and " +
			"left for a later apply. A Cluster without an `Available` condition is judged by its Nodes alone; a gate that cannot be " +
			"read before the change (Nodes not listable with the cluster's credentials) is not checked after it, and the apply warns " +
			"that the cluster went ungated and why. Default `true`.",
	},
}

// CEL checks that a string is a CEL expression giving a bool over an object's fields. The
// error names the attribute in its text too (verify.health_checks[0].current), since Terraform
// shows only the configuration lines of an attribute error, which may not say which entry.
func CEL() validator.String {
	return stringFunc{description: "must be a CEL expression giving a bool", summary: "Invalid CEL Expression", check: health.CompileExpr, named: true}
}

// HealthChecker compiles a `verify.health_checks` value; null or unknown gives an empty
// Checker. Errors (two entries for one kind) are reported against the attribute.
func HealthChecker(ctx context.Context, v types.List) (*health.Checker, diag.Diagnostics) {
	var diags diag.Diagnostics
	rules, d := HealthRules(ctx, v)
	diags.Append(d...)
	c, err := health.Compile(rules)
	if err != nil {
		diags.AddAttributeError(PathHealthChecks, "Invalid Health Checks", err.Error())
		return &health.Checker{}, diags
	}
	return c, diags
}

// HealthRules reads a `verify.health_checks` value.
func HealthRules(ctx context.Context, v types.List) ([]health.Rule, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var checks []HealthCheckModel
	diags := v.ElementsAs(ctx, &checks, false)
	var out []health.Rule
	for _, c := range checks {
		if c.APIVersion.IsUnknown() || c.Kind.IsUnknown() || c.Current.IsUnknown() || c.Failed.IsUnknown() || c.InProgress.IsUnknown() {
			return nil, diags // known at apply
		}
		out = append(out, health.Rule{
			APIVersion: c.APIVersion.ValueString(), Kind: c.Kind.ValueString(),
			Current: c.Current.ValueString(), Failed: c.Failed.ValueString(), InProgress: c.InProgress.ValueString(),
		})
	}
	return out, diags
}

// HealthValue is the `verify.health_checks` value of rules (null when there are none), for an
// import or a read from the records.
func HealthValue(rules []health.Rule) types.List {
	elem := types.ObjectType{AttrTypes: HealthCheckAttrTypes}
	if len(rules) == 0 {
		return types.ListNull(elem)
	}
	vals := make([]attr.Value, len(rules))
	for i, r := range rules {
		vals[i] = types.ObjectValueMust(HealthCheckAttrTypes, map[string]attr.Value{
			"api_version": types.StringValue(r.APIVersion), "kind": types.StringValue(r.Kind),
			"current": types.StringValue(r.Current), "failed": optString(r.Failed), "in_progress": optString(r.InProgress),
		})
	}
	return types.ListValueMust(elem, vals)
}

func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
