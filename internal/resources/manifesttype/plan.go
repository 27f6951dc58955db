package manifesttype

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Semantic equality alone does not reach plans: the framework applies it to what Read, Create and
// Update return, while a plan carries the configuration's text, so a reformatted `manifests` would
// still plan an update (that changes nothing). Two steps keep such a plan empty:
//
//  1. KeepPriorOnSameRevision plans the prior text when the new one names the same revision.
//     Terraform accepts a planned value equal to the prior one for a non-computed attribute:
//     that is how a provider says the configuration's value is equivalent.
//  2. RestorePrior, at the start of a resource's ModifyPlan, undoes what the framework did before
//     any modifier ran: seeing the proposed text differ from the prior one, it marked every
//     computed attribute unknown.

// KeepPriorOnSameRevision is the plan modifier of `manifests` attributes.
func KeepPriorOnSameRevision() planmodifier.String { return keepPrior{} }

type keepPrior struct{}

func (keepPrior) Description(context.Context) string {
	return "A formatting-only edit (same revision) keeps the prior text: no update is planned."
}

func (m keepPrior) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (keepPrior) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.StateValue.IsNull() || req.StateValue.IsUnknown() || req.PlanValue.IsNull() || req.PlanValue.IsUnknown() {
		return
	}
	if req.PlanValue.ValueString() != req.StateValue.ValueString() && SameRevision(req.StateValue.ValueString(), req.PlanValue.ValueString()) {
		resp.PlanValue = req.StateValue
	}
}

// RestorePrior returns prior when plan differs from it only by values the framework marked
// unknown because the proposed state differed from the prior one (computed attributes that the
// configuration leaves null), and reports whether it did. A resource calls it first in ModifyPlan
// with the raw plan, configuration and prior state: once KeepPriorOnSameRevision kept the prior
// `manifests`, a formatting-only edit leaves nothing else changed.
func RestorePrior(plan, config, prior tftypes.Value) (tftypes.Value, bool) {
	if prior.IsNull() || !prior.IsKnown() || plan.IsNull() || plan.Equal(prior) {
		return plan, false
	}
	restored, err := tftypes.Transform(plan, func(p *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if v.IsKnown() {
			return v, nil
		}
		c, _, walkErr := tftypes.WalkAttributePath(config, p)
		if walkErr != nil {
			return v, nil //nolint:nilerr // not in the configuration (a nested computed value): keep the plan's mark
		}
		if cv, ok := c.(tftypes.Value); !ok || !cv.IsNull() {
			return v, nil // unknown in the configuration: a real "known after apply"
		}
		if pv, _, err := tftypes.WalkAttributePath(prior, p); err == nil {
			if pval, ok := pv.(tftypes.Value); ok {
				return pval, nil
			}
		}
		return v, nil
	})
	if err != nil || !restored.Equal(prior) {
		return plan, false
	}
	return prior, true
}
