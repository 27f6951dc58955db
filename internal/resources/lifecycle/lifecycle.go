// Package lifecycle holds the parts of a resource's Terraform lifecycle that the resources
// applying through internal/delivery (`gradual_rollout`, `gradual_module_assignment`) share:
// provider data, `namespace/name` import, the Create/Update skeleton with its state rules, the ModifyPlan preamble, and plan-time
// wording. It is shared so that a rule such as "a failed Create saves no state" cannot hold for
// one resource and drift for the other. What each resource applies stays in its own package.
package lifecycle

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
)

// Attribute paths both resources report diagnostics against.
var (
	PathSelector    = path.Root("selector")
	PathUpdateLimit = path.Root("update_limit")
	PathMaxFailures = path.Root("max_failures")
)

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
