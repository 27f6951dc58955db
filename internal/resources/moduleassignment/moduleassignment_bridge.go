package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

var pathFollowJoins = fleetresource.PathFollowJoins

var followJoinsAttribute = fleetresource.FollowJoinsAttribute("A bridge for clusters that join between applies: the assignment keeps, in the Clusters' namespace, one " +
	"Cluster API `ClusterResourceSet` (strategy `ApplyOnce`, this assignment's `selector`) and one ConfigMap per module in " +
	"`depends_on` order holding the last revision of the module the fleet verified (never one in flight, never one " +
	"recorded invalid). Cluster API's own ClusterResourceSet controller gives a joiner those objects as soon as its " +
	"control plane answers, with no Terraform run; the next plan lists the joiner, and its apply takes it over (the " +
	"objects the bridge created are the module's own, not adopted, and none is re-created). The bridge moves to a " +
	"module's new revision in the apply that verifies it. Needs `selector` (not `names`), and refuses at plan modules " +
	"with per-cluster `values`, Secrets or `sensitive_manifests`, or a module over 1 MiB. With `delivery.flux` the bridge is the same " +
	"ClusterResourceSet (Flux has no generator of Kustomizations per Cluster), and the apply that takes a joiner over pins its " +
	"Kustomization, which applies the same objects over the bridge's. Removing the " +
	"attribute, or destroying the assignment, removes the bridge; what it gave joiners stays, as `deletion_policy` says " +
	"once an apply took them over. See the guide [Migrating from ClusterResourceSet](../guides/migrating-from-clusterresourceset.md).")

var bridgeAttribute = fleetresource.BridgeAttribute("With `follow_joins`: per module the bridge carries, the revision it hands to joiners. Known at plan when " +
	"the plan changes no module; otherwise known after apply (a module's new revision only once a cluster verified it). " +
	"Null without `follow_joins`.")

// storedFollowJoins is follow_joins in the assignment's configuration record (import).
type storedFollowJoins = fleetresource.FollowJoins

func (m *Model) storeFollowJoins(ctx context.Context) (*storedFollowJoins, diag.Diagnostics) {
	return fleetresource.FollowJoinsOf(ctx, m.FollowJoins)
}

// followJoins is follow_joins as the assignment takes it; nil when off.
func (m *Model) followJoins(ctx context.Context) (*assignment.FollowJoins, diag.Diagnostics) {
	fj, diags := fleetresource.FollowJoinsOf(ctx, m.FollowJoins)
	if fj == nil {
		return nil, diags
	}
	return &assignment.FollowJoins{Labels: fj.Labels}, diags
}

// planBridge checks at plan that the bridge can carry the assignment, sets `bridge` (the prior
// value when no module and nothing of the bridge changes, otherwise known after apply) and warns
// what the bridge hands out and to whom it gave modules since the last apply.
func planBridge(ctx context.Context, diags *diag.Diagnostics, svc *delivery.Service, plan, prior *Model, spec assignment.Spec, query fleet.Query,
	obs *assignment.Observation) {
	if spec.FollowJoins == nil {
		plan.Bridge = types.MapNull(types.StringType)
		return
	}
	if err := assignment.CheckBridge(spec, query); err != nil {
		diags.AddAttributeError(pathFollowJoins, "Assignment Cannot Be Bridged", err.Error())
		return
	}
	plan.Bridge = types.MapUnknown(types.StringType)
	if prior != nil && !prior.Bridge.IsNull() && !prior.Bridge.IsUnknown() && prior.Revisions.Equal(plan.Revisions) && prior.FollowJoins.Equal(plan.FollowJoins) {
		plan.Bridge = prior.Bridge
	}
	var bindings map[string][]records.ModuleBinding
	var picked map[string]bool
	if obs != nil {
		bindings, picked = obs.Bindings, map[string]bool{}
		for _, c := range obs.Clusters {
			picked[c.Name] = true
		}
	}
	view, err := assignment.ReadBridge(ctx, svc, spec, bindings, picked)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Bridge"))
		return
	}
	diags.AddWarning("Bridge For Joiners", bridgeText(view, spec))
}

// bridgeText says what the bridge hands out now and after this apply, and lists the clusters
// that got modules from it since the last apply (which this apply takes over).
func bridgeText(v *assignment.BridgeView, spec assignment.Spec) string {
	var moving []string
	for _, m := range spec.Modules {
		if v.Revisions[m.Name] != m.Revision {
			moving = append(moving, m.Name+" "+m.Revision)
		}
	}
	return v.Text(moving, "a cluster of this apply")
}

// applyBridge moves the bridge after the run (or removes it, follow_joins off) and sets `bridge`.
func applyBridge(ctx context.Context, diags *diag.Diagnostics, svc *delivery.Service, plan *Model, spec assignment.Spec, query fleet.Query, res *assignment.RunResult) {
	if res == nil {
		if plan.Bridge.IsUnknown() {
			plan.Bridge = types.MapNull(types.StringType)
		}
		return
	}
	if spec.FollowJoins == nil && plan.private.Bridged == nil {
		plan.Bridge = types.MapNull(types.StringType)
		return // never bridged: nothing to remove, and nothing asked of Cluster API's API
	}
	out, err := assignment.UpdateBridge(ctx, svc, spec, query, res.Bindings)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Bridge Not Updated"))
	} else if spec.FollowJoins == nil {
		plan.private.Bridged = nil
	} else {
		plan.private.Bridged = &bridged
	}
	if out == nil {
		if plan.Bridge.IsUnknown() {
			plan.Bridge = types.MapNull(types.StringType)
		}
		return
	}
	for _, n := range out.Notes() {
		diags.AddWarning("Bridge For Joiners", n)
	}
	// A value the plan showed is a promise: only what it left unknown is filled in here; a
	// bridge that differs from it shows in the next refresh.
	if plan.Bridge.IsUnknown() {
		v, d := types.MapValueFrom(ctx, types.StringType, out.Revisions())
		diags.Append(d...)
		plan.Bridge = v
	}
}

// bridged is what private.Bridged points to once an apply wrote the bridge.
var bridged = true

// readBridge sets `bridge` from the bridge as it is (refresh).
func (m *Model) readBridge(ctx context.Context, svc *delivery.Service, spec assignment.Spec) diag.Diagnostics {
	var diags diag.Diagnostics
	if spec.FollowJoins == nil {
		m.Bridge = types.MapNull(types.StringType)
		return diags
	}
	view, err := assignment.ReadBridge(ctx, svc, spec, nil, nil)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Bridge"))
		return diags
	}
	m.Bridge, diags = types.MapValueFrom(ctx, types.StringType, view.Revisions)
	if view.Exists || len(view.Revisions) > 0 {
		m.private.Bridged = &bridged
	}
	return diags
}
