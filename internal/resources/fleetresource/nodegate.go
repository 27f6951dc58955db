// nodegate.go: `verify.node_gate`, which Nodes the cluster gate counts and how many of them may
// be unready (blame.GatePolicy), as rollouts and module assignments have it: its schema, reading
// it, and how the records keep it for import. One definition for both.

package fleetresource

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
)

// NodeGateAttrTypes are the attribute types of `verify.node_gate`.
var NodeGateAttrTypes = map[string]attr.Type{"match_labels": types.MapType{ElemType: types.StringType}, "max_unready": types.Int64Type}

// NodeGateModel is `verify.node_gate`.
type NodeGateModel struct {
	MatchLabels types.Map   `tfsdk:"match_labels"`
	MaxUnready  types.Int64 `tfsdk:"max_unready"`
}

// NodeGate is the `verify.node_gate` attribute.
var NodeGate = VerifyExtra{
	Name:    "node_gate",
	Type:    types.ObjectType{AttrTypes: NodeGateAttrTypes},
	Default: types.ObjectNull(NodeGateAttrTypes),
	Attribute: schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Tunes the Node part of `cluster_gates` (delivering directly). Left out, every Node counts and none may go " +
			"unready. The gate judges change, not state: it compares the Nodes it reads after a cluster's change with those it read " +
			"before. A Node that joined during the wave (a cluster autoscaler), was cordoned, drained, is being deleted, was deleted " +
			"or replaced (a node repair), or whose kubelet stopped posting its status (`Ready` `Unknown`: a spot interruption, a " +
			"lost host) is not judged, and the apply's warnings name it. A counted Node that was `Ready` before the change and whose " +
			"kubelet reports `Ready` `False` after it is evidence against the revision, and so is every counted Node going silent at " +
			"once (a broken network plugin), unless the clusters of later waves sampled (up to two), which the revision has not reached, are unhealthy " +
			"too: then the problem is the fleet's, and the cluster is left unsettled (counted against `max_unsettled`), never " +
			"recorded invalid.",
		Attributes: map[string]schema.Attribute{
			"match_labels": schema.MapAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Only Nodes with all of these labels count (e.g. `{ \"node-role.kubernetes.io/worker\" = \"\" }`, or a " +
					"pool that does not scale). Left out, every Node counts.",
			},
			"max_unready": schema.Int64Attribute{
				Optional: true,
				MarkdownDescription: "How many counted Nodes may be unready, before the change (more holds the cluster back) and newly " +
					"after it (more fails the revision). Default `0`.",
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
		},
	},
}

// StoredNodeGate is `verify.node_gate` as the records keep it (for import).
type StoredNodeGate struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	MaxUnready  *int64            `json:"maxUnready,omitempty"`
}

// StoreNodeGate reads `verify.node_gate`: nil when left out (or not known yet).
func StoreNodeGate(ctx context.Context, v types.Object) (*StoredNodeGate, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var m NodeGateModel
	diags := VerifyAs(ctx, v, &m)
	out := &StoredNodeGate{MaxUnready: m.MaxUnready.ValueInt64Pointer()}
	if !m.MatchLabels.IsNull() && !m.MatchLabels.IsUnknown() {
		diags.Append(m.MatchLabels.ElementsAs(ctx, &out.MatchLabels, false)...)
	}
	return out, diags
}

// Policy is the gate policy g stands for; nil is every Node, none unready.
func (g *StoredNodeGate) Policy() blame.GatePolicy {
	if g == nil {
		return blame.GatePolicy{}
	}
	var p blame.GatePolicy
	if g.MaxUnready != nil {
		p.MaxUnreadyNodes = int(*g.MaxUnready)
	}
	if len(g.MatchLabels) > 0 {
		p.NodeSelector = labels.SelectorFromSet(maps.Clone(g.MatchLabels))
	}
	return p
}

// Value is g as the attribute's value (null for nil).
func (g *StoredNodeGate) Value() types.Object {
	if g == nil {
		return types.ObjectNull(NodeGateAttrTypes)
	}
	ml := types.MapNull(types.StringType)
	if len(g.MatchLabels) > 0 {
		elems := map[string]attr.Value{}
		for k, v := range g.MatchLabels {
			elems[k] = types.StringValue(v)
		}
		ml = types.MapValueMust(types.StringType, elems)
	}
	return types.ObjectValueMust(NodeGateAttrTypes, map[string]attr.Value{"match_labels": ml, "max_unready": types.Int64PointerValue(g.MaxUnready)})
}
