// change.go: the attributes of how a change goes out that `gradual_rollout` and
// `gradual_module_assignment` share — `canary`, `canary_optional`, `on_failure`,
// `force_conflicts`, `retry_invalid`, `preview` — defined, described and parsed once, so that the two
// resources cannot come to mean different things by the same name.

package fleetresource

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// Paths of the change attributes, for diagnostics.
var (
	PathCanary    = path.Root("canary")
	PathOnFailure = path.Root("on_failure")
)

// ChangeText is what differs in the change attributes' descriptions between the resources.
type ChangeText struct {
	// Canary starts the description of `canary` ("Clusters changed first").
	Canary string
	// Subject is what goes ahead or is applied ("a rollout", "a module").
	Subject string
	// Revision names the revision retry_invalid applies ("the revision", "a module's revision").
	Revision string
	// OnFailure is the whole description of `on_failure`, default included.
	OnFailure string
}

// CanaryAttribute is `canary`.
func CanaryAttribute(t ChangeText) schema.ListAttribute {
	return schema.ListAttribute{
		Optional: true, ElementType: types.StringType,
		MarkdownDescription: t.Canary + ", in this order, in waves of their own (still at most `update_limit` at a time). " +
			"Each must be in those first waves unless `canary_optional` is set.",
		Validators: []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
	}
}

// CanaryOptionalAttribute is `canary_optional`.
func CanaryOptionalAttribute(t ChangeText) schema.BoolAttribute {
	return schema.BoolAttribute{
		Optional: true, Computed: true, Default: booldefault.StaticBool(false),
		MarkdownDescription: "Let " + t.Subject + " go ahead when a listed canary cannot be in the first waves (skipped, not ready, not picked). " +
			"Default false: the plan fails naming the canary and why, and so does an apply whose canary became unavailable " +
			"after the plan, before it changes anything, so that the first wave never goes straight to the fleet. A canary " +
			"that already runs the revision (verified by an earlier apply) counts as done.",
	}
}

// OnFailureAttribute is `on_failure`, with the resource's default.
func OnFailureAttribute(t ChangeText, def engine.OnFailure) schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true, Computed: true, Default: stringdefault.StaticString(string(def)),
		MarkdownDescription: t.OnFailure,
		Validators:          []validator.String{stringvalidator.OneOf(string(engine.Rollback), string(engine.Halt))},
	}
}

// ForceConflictsAttribute is `force_conflicts`.
func ForceConflictsAttribute() schema.BoolAttribute {
	return schema.BoolAttribute{
		Optional: true, Computed: true, Default: booldefault.StaticBool(false),
		MarkdownDescription: "Take ownership of fields another server-side applier owns (server-side apply `force`). Default false: " +
			"such conflicts fail the cluster. Fields another `gradual_rollout` or `gradual_module_assignment` applied are never " +
			"taken, forced or not (an object has one owner); fields last written by a plain update (`kubectl edit`, `scale`, " +
			"`patch`) are taken back either way: that is drift being repaired.",
	}
}

// PreviewAttribute is `preview`: which planned clusters the plan dry-runs the new revision on.
// It has no default value in the schema (null is "canary"), so that existing states plan no
// change when the provider that brings it is installed.
func PreviewAttribute() schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true,
		MarkdownDescription: "Which clusters the plan asks, by server-side dry-run apply of the new revision, what applying it would do: " +
			"`\"canary\"` (the default) the clusters of the canary waves, or of the first wave when there is no `canary`; `\"all\"` every cluster " +
			"the plan changes; `\"none\"` none. The dry-run goes through the cluster's schema validation and admission " +
			"(ValidatingAdmissionPolicies, webhooks), as an apply would, and changes nothing. An object a cluster rejects fails the plan, " +
			"naming the cluster, the object and the server's reason. Otherwise a `Dry-Run Preview` warning counts the objects each cluster " +
			"would create, change, leave unchanged, or find in conflict with another server-side applier (totals past five clusters; " +
			"clusters in conflict are named, at most ten). The dry-runs of one plan share a time budget of " +
			fmt.Sprintf("%d seconds", int(delivery.DefaultPreviewBudget.Seconds())) + ": a cluster not previewed within it, or whose API " +
			"failed, is listed as not previewed, with why, never counted as passing; apply still checks it before its wave. " +
			"Delivery through Flux previews nothing (kustomize-controller dry-runs at apply) and says so.",
		Validators: []validator.String{stringvalidator.OneOf(delivery.PreviewNone, delivery.PreviewCanary, delivery.PreviewAll)},
	}
}

// RetryInvalidAttribute is `retry_invalid`.
func RetryInvalidAttribute(t ChangeText) schema.BoolAttribute {
	return schema.BoolAttribute{
		Optional: true, Computed: true, Default: booldefault.StaticBool(false),
		MarkdownDescription: "Apply " + t.Revision + " even though it is recorded invalid, or though the last apply of it lost " +
			"contact with clusters (after fixing what made it fail outside the manifests). The ledger entry is cleared when the " +
			"revision succeeds.",
	}
}

// SetCanary sets policy's canaries from `canary` and `canary_optional`.
func SetCanary(ctx context.Context, canary types.List, optional types.Bool, policy *engine.Policy) diag.Diagnostics {
	var diags diag.Diagnostics
	policy.Canary = nil
	if !canary.IsNull() && !canary.IsUnknown() {
		diags.Append(canary.ElementsAs(ctx, &policy.Canary, false)...)
	}
	policy.CanaryOptional = optional.ValueBool()
	return diags
}

// SetOnFailure sets policy's on_failure from `on_failure`; null (a state written before the
// attribute existed) is def.
func SetOnFailure(s types.String, def engine.OnFailure, policy *engine.Policy) diag.Diagnostics {
	var diags diag.Diagnostics
	if s.IsNull() || s.IsUnknown() {
		policy.OnFailure = def
		return diags
	}
	var err error
	if policy.OnFailure, err = engine.ParseOnFailure(s.ValueString()); err != nil {
		diags.AddAttributeError(PathOnFailure, "Invalid On Failure", err.Error())
	}
	return diags
}

// SetLimits sets policy's update_limit, max_failures and max_unsettled from their attributes,
// each error reported against its own attribute (and all of them at once: one is no reason not
// to check the others).
func SetLimits(updateLimit, maxFailures, maxUnsettled types.String, policy *engine.Policy) diag.Diagnostics {
	var diags diag.Diagnostics
	var err error
	if policy.UpdateLimit, err = engine.ParseLimit(updateLimit.ValueString()); err != nil {
		diags.AddAttributeError(PathUpdateLimit, "Invalid Update Limit", err.Error())
	}
	if policy.MaxFailures, err = engine.ParseMaxFailures(maxFailures.ValueString()); err != nil {
		diags.AddAttributeError(PathMaxFailures, "Invalid Failure Budget", err.Error())
	}
	if policy.MaxUnsettled, err = MaxUnsettled(maxUnsettled); err != nil {
		diags.AddAttributeError(PathMaxUnsettled, "Invalid Unsettled Budget", err.Error())
	}
	return diags
}
