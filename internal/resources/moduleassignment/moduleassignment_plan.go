package moduleassignment

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/glue"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// ValidateConfig refuses duplicate module names, unknown depends_on names and cycles before
// anything is read or applied.
func (r *assignmentResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m Model
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Modules.IsNull() || m.Modules.IsUnknown() {
		return
	}
	mods, diags := m.modules(ctx)
	if diags.HasError() {
		return
	}
	var list []assignment.Module
	for _, mm := range mods {
		if mm.Name.IsUnknown() || mm.DependsOn.IsUnknown() {
			return
		}
		mod := assignment.Module{Name: mm.Name.ValueString()}
		resp.Diagnostics.Append(mm.DependsOn.ElementsAs(ctx, &mod.DependsOn, true)...)
		list = append(list, mod)
	}
	if _, err := assignment.Order(list); err != nil {
		resp.Diagnostics.AddAttributeError(pathModules, "Invalid Modules",
			err.Error()+". Module names must be unique, and depends_on may name only other modules of this assignment, without cycles.")
	}
}

// ModifyPlan shows at plan time what apply will do: per cluster, the bindings it will have.
// Joins, leaves, module changes and drift make the plan an update; invalid revisions, objects
// another owner manages and manifests a cluster cannot take are refused here.
func (r *assignmentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	warnDeletion(ctx, req, &resp.Diagnostics)
	// A formatting-only edit of manifests leaves nothing changed (see manifesttype).
	if restored, ok := manifesttype.RestorePrior(req.Plan.Raw, req.Config.Raw, req.State.Raw); ok {
		req.Plan.Raw, resp.Plan.Raw = restored, restored
	}
	plan, prior, ok := glue.PlanAndPrior[Model](ctx, req, resp)
	if !ok {
		return
	}
	// Terraform proposes the prior state unchanged when the configuration did not change.
	configChanged := prior == nil || !req.Plan.Raw.Equal(req.State.Raw)
	if !plan.Namespace.IsUnknown() && !plan.Name.IsUnknown() {
		plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	}
	if !plan.known() {
		plan.markObservedUnknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	spec, diags := plan.spec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.setRevisions(spec)
	if r.Data == nil {
		revisions := plan.Revisions
		plan.markObservedUnknown()
		plan.Revisions = revisions
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	query, diags := plan.query(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	svc := r.Data.Delivery
	obs, err := assignment.Observe(ctx, svc, query, spec, false)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	planned := assignment.PlanAssignment(obs, spec, priorDrift(ctx, prior))
	for i, m := range spec.Modules {
		if len(planned.Apply[m.Name]) == 0 {
			continue
		}
		if entry, ok := obs.Modules[m.Name].Invalid(m.Revision); ok {
			report := resp.Diagnostics.AddAttributeError
			if delivery.RunsRevision(obs.Modules[m.Name].Targets, m.Revision) {
				// Clusters run it already (it failed elsewhere within max_failures): it stays
				// where it runs and goes nowhere else, instead of failing every later plan.
				report = resp.Diagnostics.AddAttributeWarning
				delete(planned.Apply, m.Name)
			}
			report(pathModules.AtListIndex(i), "Module Revision Recorded Invalid",
				fmt.Sprintf("Revision %s of module %s (version %s) of %s was recorded invalid at %s after it failed on %s:\n\n  %s\n\n"+
					"The ledger lives in the management cluster (namespace %q). Change the module's manifests to apply a new revision.",
					m.Revision, m.Name, m.Version, spec.Key.Describe(), entry.RecordedAt.UTC().Format("2006-01-02T15:04:05Z"),
					strings.Join(entry.Clusters, ", "), entry.Reason, spec.RecordNamespace))
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if w := assignment.KeptOldWarning(planned, spec); w != "" {
		resp.Diagnostics.AddWarning("Clusters Keep An Older Module Version", w)
	}
	if len(obs.Skipped) > 0 {
		resp.Diagnostics.AddWarning("Clusters Skipped", glue.SkippedDetail(skippedIntro, obs.Skipped))
	}
	if len(planned.Leaving) > 0 {
		what := "loses its modules (deletion_policy = \"delete\")"
		if spec.Orphan {
			what = "keeps its objects, but its records and bindings are removed (deletion_policy = \"orphan\")"
		}
		resp.Diagnostics.AddWarning("Clusters No Longer Match",
			fmt.Sprintf("These clusters no longer match the selector; each %s: %s", what, strings.Join(planned.Leaving, ", ")))
	}
	if len(obs.Eligible) == 0 && len(obs.Skipped) == 0 {
		resp.Diagnostics.AddWarning("No Clusters Picked",
			fmt.Sprintf("The selector of %s picks no Cluster in namespace %q, so apply changes nothing there. Clusters that match later get the modules on a later apply.", spec.Key.Describe(), query.Namespace))
	}
	if err := assignment.CheckClaims(ctx, svc, spec, planned.Apply); err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(pathModules, err, "Object Claimed By Two Owners"))
		return
	}
	if err := assignment.CheckManifests(ctx, svc, spec, planned.Apply); err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(pathModules, err, "Manifests Cannot Be Applied"))
		return
	}
	if found, err := assignment.Adoptions(ctx, svc, spec, planned.Apply); err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	} else if len(found) > 0 && !plan.Adopt.IsUnknown() && !plan.Adopt.IsNull() && !plan.Adopt.ValueBool() {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(path.Root("adopt"), delivery.AdoptRefused(found, spec.Key.Describe()), "Objects Exist Already"))
		return
	} else if len(found) > 0 {
		resp.Diagnostics.AddAttributeWarning(pathModules, "Objects Will Be Adopted",
			"These objects of the modules exist already, made by someone else; apply takes them over and records them as adopted, "+
				"so the assignment never deletes them (a failed first revision puts them back as they are now; removal gives them back):\n  "+
				delivery.DescribeFound(found, 20))
	}
	switch {
	case planned.Changes() || configChanged:
		// The bindings apply leads to depend on how each cluster fares, so they are known after
		// apply (a promise here would make a failure within max_failures an inconsistent
		// result). So is `changes`: it comes from a fresh read of the fleet, and Terraform plans
		// again at apply time and rejects a known value that came out different. A warning
		// shows the changes as the fleet reads now.
		plan.markOutcomeUnknown()
		plan.Changes = types.MapUnknown(changesType)
		if summary := changesSummary(planned.Apply); summary != "" {
			resp.Diagnostics.AddWarning("Planned Module Changes", summary)
		}
	default:
		plan.Bindings, plan.Skipped, plan.Changes = prior.Bindings, prior.Skipped, prior.Changes
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// known reports whether everything the plan needs is known.
func (m *Model) known() bool {
	return !m.Namespace.IsUnknown() && !m.Name.IsUnknown() && !m.Selector.IsUnknown() && !m.Modules.IsUnknown() &&
		!m.Mode.IsUnknown() && !m.UpdateLimit.IsUnknown() && !m.MaxFailures.IsUnknown() && !m.Verify.IsUnknown() &&
		!m.RecordNamespace.IsUnknown() && !m.DeletionPolicy.IsUnknown() && m.modulesKnown() && ignoreattr.Known(m.IgnoreFields)
}

func (m *Model) modulesKnown() bool {
	for _, v := range m.Modules.Elements() {
		o, ok := v.(types.Object)
		if !ok || o.IsUnknown() {
			return false
		}
		for _, a := range o.Attributes() {
			if a.IsUnknown() {
				return false
			}
		}
	}
	return true
}

// priorDrift returns the cluster → module pairs the last refresh found drifted.
func priorDrift(ctx context.Context, prior *Model) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	if prior == nil || prior.Bindings.IsNull() || prior.Bindings.IsUnknown() {
		return out
	}
	var bindings map[string][]struct {
		Module    types.String `tfsdk:"module"`
		Revision  types.String `tfsdk:"revision"`
		AppliedAt types.String `tfsdk:"applied_at"`
		Result    types.String `tfsdk:"result"`
	}
	if diags := prior.Bindings.ElementsAs(ctx, &bindings, false); diags.HasError() {
		return out
	}
	for cluster, bs := range bindings {
		for _, b := range bs {
			if b.Result.ValueString() == records.BindingDrifted {
				if out[cluster] == nil {
					out[cluster] = map[string]bool{}
				}
				out[cluster][b.Module.ValueString()] = true
			}
		}
	}
	return out
}

const skippedIntro = "These clusters are left alone by this apply; a later apply gives them the modules once they are ready:"

// changesSummary lists, per module, the clusters apply gives the module's revision, compactly at
// any fleet size; "" when there are none.
func changesSummary(apply map[string][]string) string {
	const shown = 10
	modules := make([]string, 0, len(apply))
	for m, clusters := range apply {
		if len(clusters) > 0 {
			modules = append(modules, m)
		}
	}
	sort.Strings(modules)
	var b strings.Builder
	for _, m := range modules {
		fmt.Fprintf(&b, "module %s → %d cluster(s): %s\n", m, len(apply[m]), glue.ShortList(apply[m], shown))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
