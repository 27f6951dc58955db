package rollout

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

var followJoinsAttribute = fleetresource.FollowJoinsAttribute("A bridge for clusters that join between applies: the rollout keeps, in the " +
	"Clusters' namespace, one Cluster API `ClusterResourceSet` (strategy `ApplyOnce`, this rollout's `selector`) and one ConfigMap " +
	"holding the last revision the fleet verified: the revision every cluster the rollout picks is on, applied and verified (never " +
	"a revision in flight, part-way through its waves or stages, never one recorded invalid). Cluster API's own ClusterResourceSet " +
	"controller gives a joiner those objects as soon as its control plane answers, with no Terraform run; the next plan lists the " +
	"joiner, and its apply takes it over (the objects the bridge created are the rollout's own, not adopted, and none is " +
	"re-created). The bridge moves to a new revision in the apply that verifies it on the fleet. Needs `selector` (not `names`), " +
	"and refuses at plan `values`, Secrets or `sensitive_manifests`, or manifests over 1 MiB. With `delivery.flux` the bridge is the same " +
	"ClusterResourceSet (Flux has no generator of Kustomizations per Cluster), and the apply that takes a joiner over pins its " +
	"Kustomization, which applies the same objects over the bridge's. Removing the " +
	"attribute, or destroying the rollout, removes the bridge; what it gave joiners stays, as `deletion_policy` says once an " +
	"apply took them over. See the guide [Migrating from ClusterResourceSet](../guides/migrating-from-clusterresourceset.md).")

var bridgeAttribute = fleetresource.BridgeAttribute("With `follow_joins`: `revision`, the revision the bridge hands to joiners " +
	"(none while the fleet has verified none). Known at plan when the plan changes neither the revision nor `follow_joins`; " +
	"otherwise known after apply (a new revision only once the fleet verified it). Null without `follow_joins`.")

// followJoins is follow_joins as configured; nil when off.
func (m *Model) followJoins(ctx context.Context) (*fleetresource.FollowJoins, diag.Diagnostics) {
	return fleetresource.FollowJoinsOf(ctx, m.FollowJoins)
}

// planBridge checks at plan that the bridge can carry the rollout, sets `bridge` (the prior
// value when neither the revision nor follow_joins changes, otherwise known after apply) and
// warns what the bridge hands out and to whom it gave the revision since the last apply.
func planBridge(ctx context.Context, diags *diag.Diagnostics, svc *delivery.Service, plan, prior *Model, spec delivery.Spec, query fleet.Query, obs *delivery.Observation) {
	fj, d := plan.followJoins(ctx)
	diags.Append(d...)
	if fj == nil || d.HasError() {
		plan.Bridge = types.MapNull(types.StringType)
		return
	}
	if err := delivery.CheckBridge(spec, query); err != nil {
		diags.AddAttributeError(fleetresource.PathFollowJoins, "Rollout Cannot Be Bridged", err.Error())
		return
	}
	plan.Bridge = types.MapUnknown(types.StringType)
	if prior != nil && !prior.Bridge.IsNull() && !prior.Bridge.IsUnknown() && prior.Revision.Equal(plan.Revision) && prior.FollowJoins.Equal(plan.FollowJoins) {
		plan.Bridge = prior.Bridge
	}
	view, err := svc.ReadBridge(ctx, spec, obs)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Bridge"))
		return
	}
	diags.AddWarning("Bridge For Joiners", bridgeText(view, spec.Revision))
}

// bridgeText is the plan's Bridge For Joiners warning.
func bridgeText(v *crsbridge.View, revision string) string {
	var moving []string
	if v.Revisions[delivery.BridgeModule] != revision {
		moving = []string{delivery.BridgeModule + " " + revision}
	}
	return v.Text(moving, "every cluster of the rollout")
}

// applyBridge moves the bridge after the run (after: the fleet as the run left it), or removes
// it once follow_joins is off, and sets `bridge`.
func (m *Model) applyBridge(ctx context.Context, diags *diag.Diagnostics, svc *delivery.Service, spec delivery.Spec, query fleet.Query, after *delivery.Observation) {
	fj, d := m.followJoins(ctx)
	diags.Append(d...)
	if fj == nil && m.private.Bridged == nil {
		m.Bridge = types.MapNull(types.StringType)
		return // never bridged: nothing to remove, and nothing asked of Cluster API's API
	}
	var labels map[string]string
	if fj != nil {
		labels = fj.Labels
	}
	choice, err := svc.UpdateBridge(ctx, spec, query, fj != nil, labels, after)
	switch {
	case err != nil:
		diags.Append(diagnostics.FromError(err, "Bridge Not Updated"))
	case fj == nil:
		m.private.Bridged = nil
	default:
		m.private.Bridged = &bridged
	}
	if choice != nil && choice.Why != "" {
		diags.AddWarning("Bridge For Joiners", choice.Why)
	}
	if !m.Bridge.IsUnknown() {
		// A value the plan showed is a promise: only what it left unknown is filled in here; a
		// bridge that differs from it shows in the next refresh.
		return
	}
	if fj == nil {
		m.Bridge = types.MapNull(types.StringType)
		return
	}
	revs := map[string]string{}
	if choice != nil && choice.Revision != "" {
		revs[delivery.BridgeModule] = choice.Revision
	}
	m.Bridge, d = fleetresource.BridgeValue(ctx, revs)
	diags.Append(d...)
}

// settleBridgeUnread gives `bridge` a value when an apply that did not touch the bridge (a
// paused rollout) finds it unknown: none, until the next refresh reads it.
func (m *Model) settleBridgeUnread() {
	if m.Bridge.IsUnknown() {
		m.Bridge = types.MapNull(types.StringType)
	}
}

// bridged is what private.Bridged points to once an apply wrote the bridge.
var bridged = true

// readBridge sets `bridge` from the bridge as it is (refresh).
func (m *Model) readBridge(ctx context.Context, svc *delivery.Service, key records.Key) diag.Diagnostics {
	fj, diags := m.followJoins(ctx)
	if fj == nil {
		m.Bridge = types.MapNull(types.StringType)
		return diags
	}
	held, err := crsbridge.NewStore(svc.ManagementClient()).Read(ctx, key, m.Namespace.ValueString())
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Bridge"))
		return diags
	}
	var d diag.Diagnostics
	m.Bridge, d = fleetresource.BridgeValue(ctx, held.Revisions)
	diags.Append(d...)
	if held.Exists || len(held.Revisions) > 0 {
		m.private.Bridged = &bridged
	}
	return diags
}

// removeBridge removes the bridge at destroy, when the rollout has or had one, before the
// rollout's objects go: a cluster joining during the destroy must not get what it removes. It
// reports whether the destroy may go on.
func (m *Model) removeBridge(ctx context.Context, diags *diag.Diagnostics, svc *delivery.Service, spec delivery.Spec, private fleetresource.PrivateGetter) bool {
	diags.Append(fleetresource.LoadPrivateJSON(ctx, private, "rollout", map[string]any{privateBridgedKey: &m.private.Bridged})...)
	if m.FollowJoins.IsNull() && m.Bridge.IsNull() && m.private.Bridged == nil {
		return true // never bridged: nothing asked of Cluster API's API
	}
	if err := svc.RemoveBridge(ctx, spec); err != nil {
		diags.Append(diagnostics.FromError(err, "Rollout Delete Failed"))
		return false
	}
	return true
}
