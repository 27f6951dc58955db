package moduleassignment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

var pathFollowJoins = path.Root("follow_joins")

var followJoinsAttrTypes = map[string]attr.Type{"labels": types.MapType{ElemType: types.StringType}}

var followJoinsAttribute = schema.SingleNestedAttribute{
	Optional: true,
	MarkdownDescription: "A bridge for clusters that join between applies: the assignment keeps, in the Clusters' namespace, one " +
		"Cluster API `ClusterResourceSet` (strategy `ApplyOnce`, this assignment's `selector`) and one ConfigMap per module in " +
		"`depends_on` order holding the last revision of the module the fleet verified (never one in flight, never one " +
		"recorded invalid). Cluster API's own ClusterResourceSet controller gives a joiner those objects as soon as its " +
		"control plane answers, with no Terraform run; the next plan lists the joiner, and its apply takes it over (the " +
		"objects the bridge created are the module's own, not adopted, and none is re-created). The bridge moves to a " +
		"module's new revision in the apply that verifies it. Needs `selector` (not `names`), and refuses at plan modules " +
		"with per-cluster `values`, Secrets or `sensitive_manifests`, a module over 1 MiB, and `delivery.flux`. Removing the " +
		"attribute, or destroying the assignment, removes the bridge; what it gave joiners stays, as `deletion_policy` says " +
		"once an apply took them over. See the guide [Migrating from ClusterResourceSet](../guides/migrating-from-clusterresourceset.md).",
	Attributes: map[string]schema.Attribute{
		"labels": schema.MapAttribute{
			Optional: true, ElementType: types.StringType,
			MarkdownDescription: "Labels put on the bridge's ClusterResourceSet and ConfigMaps, e.g. " +
				"`\"cluster.x-k8s.io/watch-filter\" = \"<value>\"` when Cluster API's manager runs with `--watch-filter` (it then " +
				"reconciles only objects with that label, Clusters included).",
		},
	},
}

var bridgeAttribute = schema.MapAttribute{
	Computed: true, ElementType: types.StringType,
	MarkdownDescription: "With `follow_joins`: per module the bridge carries, the revision it hands to joiners. Known at plan when " +
		"the plan changes no module; otherwise known after apply (a module's new revision only once a cluster verified it). " +
		"Null without `follow_joins`.",
}

// storedFollowJoins is follow_joins in the assignment's configuration record (import).
type storedFollowJoins struct {
	Labels map[string]string `json:"labels,omitempty"`
}

func (m *Model) storeFollowJoins(ctx context.Context) (*storedFollowJoins, diag.Diagnostics) {
	fj, diags := m.followJoins(ctx)
	if fj == nil {
		return nil, diags
	}
	return &storedFollowJoins{Labels: fj.Labels}, diags
}

// value is follow_joins as the configuration that s was stored from wrote it.
func (s *storedFollowJoins) value() types.Object {
	if s == nil {
		return types.ObjectNull(followJoinsAttrTypes)
	}
	labels := types.MapNull(types.StringType)
	if len(s.Labels) > 0 {
		labels = types.MapValueMust(types.StringType, stringValues(s.Labels))
	}
	return types.ObjectValueMust(followJoinsAttrTypes, map[string]attr.Value{"labels": labels})
}

func stringValues(m map[string]string) map[string]attr.Value {
	out := make(map[string]attr.Value, len(m))
	for k, v := range m {
		out[k] = types.StringValue(v)
	}
	return out
}

// followJoins is follow_joins as the assignment takes it; nil when off.
func (m *Model) followJoins(ctx context.Context) (*assignment.FollowJoins, diag.Diagnostics) {
	var diags diag.Diagnostics
	if m.FollowJoins.IsNull() || m.FollowJoins.IsUnknown() {
		return nil, diags
	}
	var fj struct {
		Labels types.Map `tfsdk:"labels"`
	}
	diags.Append(m.FollowJoins.As(ctx, &fj, objectOpts)...)
	out := &assignment.FollowJoins{}
	if !fj.Labels.IsNull() && !fj.Labels.IsUnknown() {
		diags.Append(fj.Labels.ElementsAs(ctx, &out.Labels, false)...)
	}
	if !m.Delivery.IsNull() && !m.Delivery.IsUnknown() {
		diags.AddAttributeError(pathFollowJoins, "Follow Joins Not Through Flux",
			"follow_joins keeps a Cluster API ClusterResourceSet, which applies through the workload clusters' kubeconfig Secrets; with `delivery.flux` leave it off.")
	}
	return out, diags
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
	var b strings.Builder
	if v.Exists {
		fmt.Fprintf(&b, "ClusterResourceSet %s hands joiners: %s.", v.Name, revisionsText(v.Revisions))
	} else {
		fmt.Fprintf(&b, "Apply creates ClusterResourceSet %s.", v.Name)
	}
	var moving []string
	for _, m := range spec.Modules {
		if v.Revisions[m.Name] != m.Revision {
			moving = append(moving, m.Name+" "+m.Revision)
		}
	}
	if len(moving) > 0 {
		fmt.Fprintf(&b, " It moves to %s once a cluster of this apply verifies it (never to a revision recorded invalid).", strings.Join(moving, ", "))
	}
	if len(v.Joiners) > 0 {
		b.WriteString("\nJoined since the last apply, given modules by the bridge (this apply takes them over):")
		for _, j := range v.Joiners {
			fmt.Fprintf(&b, "\n  %s: %s", j.Cluster, j.String())
		}
	}
	if len(v.Left) > 0 {
		b.WriteString("\nLeft before an apply took them over (no longer picked; what the bridge gave them stays there, and no apply of this assignment removes it):")
		for _, j := range v.Left {
			fmt.Fprintf(&b, "\n  %s: %s", j.Cluster, j.String())
		}
	}
	return b.String()
}

func revisionsText(revs map[string]string) string {
	if len(revs) == 0 {
		return "nothing yet"
	}
	parts := make([]string, 0, len(revs))
	for _, m := range slices.Sorted(maps.Keys(revs)) {
		parts = append(parts, m+" "+revs[m])
	}
	return strings.Join(parts, ", ")
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
