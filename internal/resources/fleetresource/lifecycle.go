// lifecycle.go: small pieces of the Terraform lifecycle that the resources over a fleet share:
// provider data, `namespace/name` import, limits and plan-time wording. The Create, Update,
// Read and Delete path itself is Resource (apply.go), which all three resources that run
// through an engine use (`gradual_rollout` and `gradual_module_assignment` through Lifecycle,
// engine.go; `gradual_inplace_update` directly), so that a rule such as "a failed Create saves
// no state" cannot hold for one resource and drift for another. Their ModifyPlan path is
// ModifyPlan (modifyplan.go), which the two that run through delivery take by way of
// Lifecycle.ModifyPlan (deliveryplan.go). What each resource applies stays in its own package.

package fleetresource

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Attribute paths both resources report diagnostics against.
var (
	PathSelector    = path.Root("selector")
	PathUpdateLimit = path.Root("update_limit")
	PathMaxFailures = path.Root("max_failures")
	// PathMaxUnsettled is `max_unsettled`, on the resources that apply through delivery.
	PathMaxUnsettled = path.Root("max_unsettled")
)

// MaxUnsettledDescription documents `max_unsettled` for both resources.
const MaxUnsettledDescription = "Clusters that may stop answering after their change began — reachable before their wave, " +
	"then not writable, readable or verifiable (a revision can break a cluster's admission or API server) — before no new wave " +
	"starts: a whole number ≥ 0 or a percentage from 0% to 100%. Such a cluster is restored to its backup where that still " +
	"works, is not recorded invalid on that evidence alone, and the next plan refuses to take the same revision past it " +
	"without `retry_invalid = true`. Unset means `\"0\"`: the first such cluster halts the rollout (nothing is rolled back)."

// MaxUnsettled parses `max_unsettled`; null is "0".
func MaxUnsettled(s types.String) (engine.Limit, error) {
	if s.IsNull() || s.IsUnknown() {
		return engine.Limit{}, nil
	}
	return engine.ParseMaxUnsettled(s.ValueString())
}

// Configured keeps the provider's data. Embedded in a resource it gives the resource its
// Configure; Data stays nil until the provider is configured (during validation and in plans
// whose provider settings are not known yet).
type Configured struct{ Data *providerdata.Data }

// Configure implements resource.ResourceWithConfigure.
func (c *Configured) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c.Data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

// ImportNamespaceName is ImportState for resources named `namespace/name`: it sets id, namespace
// and name, and Read then fills everything else from the records. what names the resource in
// the diagnostic ("rollout") and example is an ID to show ("fleet/ingress").
func ImportNamespaceName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, what, example string) {
	namespace, name, ok := strings.Cut(req.ID, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		resp.Diagnostics.AddError("Invalid Import ID",
			fmt.Sprintf("Import ID %q must be namespace/name: the namespace of the Cluster objects and the %s's name, e.g. %s.", req.ID, what, example))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// SortedNames is a list of cluster names for a plan (`leaving`): sorted, and an empty list for
// none, never null.
func SortedNames(names []string) types.List {
	elems := make([]attr.Value, 0, len(names))
	for _, n := range slices.Sorted(slices.Values(names)) {
		elems = append(elems, types.StringValue(n))
	}
	return types.ListValueMust(types.StringType, elems)
}

// ImportHint is the import command and block for a resource of typeName whose records exist
// already under key, for the refusal of a second create.
func ImportHint(typeName string, key records.Key) string {
	id := key.Namespace + "/" + key.Name
	return fmt.Sprintf("  terraform import %[1]s.<name> %[2]s\n\nor, in the configuration:\n\n  import {\n    to = %[1]s.<name>\n    id = %[2]q\n  }", typeName, id)
}

// Identity is what names a resource's records: a change of any of it replaces the resource.
type Identity struct{ Name, Namespace, RecordNamespace types.String }

// IdentityChange names the attributes that make plan a replacement of prior ("" if none): they
// name the records, so a change is a destroy and a create.
func IdentityChange(plan, prior Identity) string {
	var changed []string
	for _, a := range []struct {
		name        string
		plan, prior types.String
	}{{"name", plan.Name, prior.Name}, {"namespace", plan.Namespace, prior.Namespace}, {"record_namespace", plan.RecordNamespace, prior.RecordNamespace}} {
		if !a.plan.IsUnknown() && !a.plan.Equal(a.prior) {
			changed = append(changed, a.name)
		}
	}
	return strings.Join(changed, ", ")
}
