package inplaceupdate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// NewResource returns the `gradual_inplace_update` resource. A failed Create is saved
// (fleetresource.FailedCreate.Saved): its status shows which machines were updated, and the
// replacement Terraform then plans changes nothing but runs the update again.
func NewResource() resource.Resource {
	r := &updateResource{}
	r.Resource = fleetresource.Resource[Model, *Model]{Type: "_inplace_update", Failed: fleetresource.FailedCreate{Saved: true}, Ops: r}
	return r
}

// updateResource runs through the lifecycle every resource that runs through an engine shares
// (fleetresource.Resource: Configure, Metadata, Create, Update, Read, Delete); its
// fleetresource.Ops are Apply, Refresh and Destroy. Its ModifyPlan is fleetresource.ModifyPlan with its
// fleetresource.Planner (plansteps.go); its ImportState is its own.
type updateResource struct {
	fleetresource.Resource[Model, *Model]
}

var (
	_ resource.ResourceWithConfigure   = (*updateResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*updateResource)(nil)
	_ resource.ResourceWithImportState = (*updateResource)(nil)
)

// Model is the resource's configuration and state.
type Model struct {
	Input
	ID          types.String   `tfsdk:"id"`
	UpdateLimit types.String   `tfsdk:"update_limit"`
	MaxFailures types.String   `tfsdk:"max_failures"`
	Canary      types.List     `tfsdk:"canary"`
	Summary     types.Map      `tfsdk:"summary"`
	Attention   types.Map      `tfsdk:"attention"`
	Waves       types.String   `tfsdk:"waves"`
	Verify      types.Object   `tfsdk:"verify"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
	Revision    types.String   `tfsdk:"revision"`
	// BootstrapDigest stands in for the write-only bootstrap patch in plan and state.
	BootstrapDigest types.String `tfsdk:"bootstrap_config_spec_patch_digest"`
	Plan            types.List   `tfsdk:"plan"`
	Status          types.Map    `tfsdk:"status"`
	// private is kept in the resource's private state (fleet form; see private.go).
	private fleetPrivate
}

// controlPlaneIDPrefix marks the control plane in an ID (a name never holds a colon).
const controlPlaneIDPrefix = "control-plane:"

func (m *Model) id() types.String {
	if m.fleet() {
		return m.fleetID()
	}
	if m.MachineDeployment.ValueString() != "" {
		return types.StringValue(m.Namespace.ValueString() + "/" + m.Cluster.ValueString() + "/" + m.MachineDeployment.ValueString())
	}
	return types.StringValue(m.Namespace.ValueString() + "/" + m.Cluster.ValueString() + "/" + controlPlaneIDPrefix + m.ControlPlane.ValueString())
}

func (m *Model) verifyTimeout(ctx context.Context) (time.Duration, diag.Diagnostics) {
	var v struct {
		Timeout types.String `tfsdk:"timeout"`
	}
	var diags diag.Diagnostics
	if !m.Verify.IsNull() && !m.Verify.IsUnknown() {
		diags = m.Verify.As(ctx, &v, basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true})
	}
	s := v.Timeout.ValueString()
	if s == "" {
		s = defaultVerifyTimeout
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		diags.AddAttributeError(path.Root("verify").AtName("timeout"), "Invalid Duration", err.Error())
	}
	return d, diags
}

// ModifyPlan shows, at plan time, the plan of every machine: the diff names the machines
// that change and how. A configuration whose machines are all as desired keeps the state's
// plan and status, so a re-plan after a successful apply is empty. The steps are
// fleetresource's (fleetresource.ModifyPlan); the in-place update's own are its
// fleetresource.Planner (plansteps.go).
func (r *updateResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	fleetresource.ModifyPlan[Model](ctx, req, resp, r)
}

// planSingle plans the single-owner form against its machines as they read now.
func (r *updateResource) planSingle(ctx context.Context, plan, prior *Model, diags *diag.Diagnostics) bool {
	res := plan.planOwner(ctx, r.Data.FleetUpdate, "\nTerraform plans again when it applies: if this comes from applying a plan that showed these machines in place, "+
		"that plan is stale (an extension was removed or answers differently now, or Cluster API's InPlaceUpdates feature gate was turned off). Nothing was written; plan again.",
		diags)
	if res == nil {
		return false
	}
	for _, m := range res.Plan.Machines {
		tflog.Info(ctx, fmt.Sprintf("in-place plan: machine %s (node %s): %s %v by %v", m.Machine, m.Node, m.Strategy, m.Changed, m.Extensions))
	}
	plan.Revision = types.StringValue(res.Revision)
	nothingToDo := res.Plan.Counts()[inplace.StrategyUnchanged] == len(res.Plan.Machines)
	if nothingToDo && prior != nil && !prior.Plan.IsNull() && prior.Revision.ValueString() == res.Revision {
		plan.Plan, plan.Status = prior.Plan, prior.Status
		plan.Summary, plan.Attention, plan.Waves = prior.Summary, prior.Attention, prior.Waves
		return true
	}
	var d diag.Diagnostics
	plan.Plan, d = machinesValue(res.Plan)
	diags.Append(d...)
	plan.Status = types.MapUnknown(types.StringType)
	diags.Append(plan.setSingleSummary(ctx, res)...)
	return true
}

// readWriteOnly takes the write-only `bootstrap_config_spec_patch` from the configuration:
// Terraform keeps it out of plan and state, so ModifyPlan, Create and Update find it only there.
func (m *Model) readWriteOnly(ctx context.Context, config tfsdk.Config) diag.Diagnostics {
	return config.GetAttribute(ctx, path.Root("bootstrap_config_spec_patch"), &m.BootstrapConfigSpecPatch)
}

// setPlan writes the model with the write-only patch null, as Terraform requires.
func (m *Model) setPlan(ctx context.Context, p *tfsdk.Plan) diag.Diagnostics {
	c := *m
	c.BootstrapConfigSpecPatch = types.StringNull()
	return p.Set(ctx, &c)
}

// digest is `bootstrap_config_spec_patch_digest`: a short hash of the normalised patch, "" when
// unset, unknown when the patch is.
func digest(v types.String) types.String {
	if v.IsUnknown() {
		return types.StringUnknown()
	}
	b := patchBytes(v)
	if b == nil {
		return types.StringValue("")
	}
	return types.StringValue(owners.Digest(b))
}

// TimeoutsValue is the `timeouts` attribute, for fleetresource.Create and fleetresource.Update.
func (m *Model) TimeoutsValue() timeouts.Value { return m.Timeouts }

// ReadWriteOnly reads the write-only `bootstrap_config_spec_patch` from the configuration; ClearWriteOnly
// nulls it again before a state is saved (see fleetresource.WriteOnly).
func (m *Model) ReadWriteOnly(ctx context.Context, config tfsdk.Config) diag.Diagnostics {
	return m.readWriteOnly(ctx, config)
}

// ClearWriteOnly: see ReadWriteOnly.
func (m *Model) ClearWriteOnly() { m.BootstrapConfigSpecPatch = types.StringNull() }

// Apply (fleetresource.Ops) plans again against the live machines and executes the plan, filling
// plan's computed attributes with what was done; Create and Update alike. It reports whether the
// update succeeded.
func (r *updateResource) Apply(ctx context.Context, timeout time.Duration, plan *Model, diags *diag.Diagnostics, _ bool) bool {
	if !r.Data.Configured(diags) {
		return false
	}
	plan.ID = plan.id()
	verify, d := plan.verifyTimeout(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if plan.fleet() {
		r.applyFleet(ctx, plan, verify, diags)
		return !diags.HasError()
	}
	spec, d := plan.ownerSpec(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	out, err := r.Data.FleetUpdate.Apply(ctx, fleetupdate.ApplyRequest{
		Spec:  spec,
		Shown: shownMachines(plan.Plan),
		Exec: ownerupdate.ExecuteRequest{
			VerifyTimeout: verify,
			Logf:          func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
			Holder:        records.HolderIdentity(),
		},
	})
	var stale *fleetupdate.StaleError
	switch {
	case out == nil:
		diags.Append(diagnostics.FromError(err, "In-Place Update Plan Failed"))
		plan.fillUnknown()
		return false
	case errors.As(err, &stale):
		diags.AddError("In-Place Update Plan Is Stale", stale.Error())
		plan.fillUnknown()
		return false
	}
	res := out.Owner
	plan.Revision = types.StringValue(res.Revision)
	if plan.Plan.IsUnknown() {
		plan.Plan, d = machinesValue(res.Plan)
		diags.Append(d...)
	}
	if plan.Summary.IsUnknown() || plan.Attention.IsUnknown() || plan.Waves.IsUnknown() {
		diags.Append(plan.setSingleSummary(ctx, res)...)
	}
	status := map[string]string{}
	if out.Execution != nil {
		status = out.Execution.Status
	}
	if plan.Status.IsUnknown() {
		plan.Status, d = types.MapValueFrom(ctx, types.StringType, status)
		diags.Append(d...)
	}
	if err != nil {
		diags.Append(diagnostics.FromError(err, "In-Place Update Failed"))
	}
	return !diags.HasError()
}

func (m *Model) fillUnknown() {
	if m.Revision.IsUnknown() {
		m.Revision = types.StringValue("")
	}
	if m.Plan.IsUnknown() {
		m.Plan = types.ListNull(types.ObjectType{AttrTypes: machineAttrTypes})
	}
	if m.Status.IsUnknown() {
		m.Status = types.MapNull(types.StringType)
	}
	if m.Summary.IsUnknown() {
		m.Summary = types.MapNull(types.Int64Type)
	}
	if m.Attention.IsUnknown() {
		m.Attention = types.MapNull(types.StringType)
	}
	if m.Waves.IsUnknown() {
		m.Waves = types.StringNull()
	}
}

// Refresh (fleetresource.Ops) refreshes status and plan from the live machines: their annotations, specs and Nodes
// (no extension is called). A Machine that no longer exists drops out of both; one changed
// outside Terraform shows as `drifted`, and the next plan (ModifyPlan) updates it again. An
// imported resource (no revision yet) gets its version, revision and plan from the machines.
// It reports whether it read them (fleetresource.Ops); Read then saves state and private state.
func (r *updateResource) Refresh(ctx context.Context, state *Model, _ fleetresource.PrivateGetter, diags *diag.Diagnostics) bool {
	if state.fleet() {
		return r.readFleet(ctx, state, diags)
	}
	return r.readOwner(ctx, state, diags)
}

// readOwner is Refresh of the single-owner form.
func (r *updateResource) readOwner(ctx context.Context, state *Model, out *diag.Diagnostics) bool {
	imported := state.Revision.IsNull()
	request, diags := state.request(ctx)
	out.Append(diags...)
	if out.HasError() {
		return false
	}
	obs, err := r.Data.InPlaceReader.Observe(ctx, request.Selection, request.Change)
	if err != nil {
		out.Append(diagnostics.FromError(err, "Cannot Read Machines"))
		return false
	}
	for _, n := range obs.Notes {
		out.AddWarning("In-Place Update Not Fully Refreshed", n)
	}
	if imported {
		if obs.OwnerGone {
			out.AddError("Owner Not Found",
				fmt.Sprintf("No MachineDeployment or KubeadmControlPlane named by %q exists in namespace %q of the management cluster.", state.ID.ValueString(), request.Selection.Namespace))
			return false
		}
		state.fillImported(obs)
		if _, diags = state.request(ctx); diags.HasError() {
			out.Append(diags...)
			return false
		}
	}
	prior := map[string]string{}
	if !state.Status.IsNull() && !state.Status.IsUnknown() {
		out.Append(state.Status.ElementsAs(ctx, &prior, false)...)
	}
	status := map[string]string{}
	for _, m := range obs.Machines {
		if _, ok := prior[m.Machine]; ok || imported || state.Status.IsNull() {
			status[m.Machine] = m.Status(prior[m.Machine])
		} else if s := m.Status(""); s != owners.StatusUnchanged {
			// A machine the last apply did not see (a new one): shown when it needs work.
			status[m.Machine] = s
		}
	}
	state.Status, diags = types.MapValueFrom(ctx, types.StringType, status)
	out.Append(diags...)
	if imported {
		state.Plan, diags = machinesValue(obs.Plan())
		out.Append(diags...)
	} else if !state.Plan.IsNull() && !state.Plan.IsUnknown() {
		state.Plan = keepMachines(ctx, state.Plan, func(name string) bool {
			return slices.ContainsFunc(obs.Machines, func(m owners.Observed) bool { return m.Machine == name })
		})
	}
	return true
}

// keepMachines is the plan list without the machines keep refuses.
func keepMachines(ctx context.Context, plan types.List, keep func(name string) bool) types.List {
	var elems []attr.Value
	for _, e := range plan.Elements() {
		o, ok := e.(types.Object)
		if !ok {
			elems = append(elems, e)
			continue
		}
		if n, ok := o.Attributes()["name"].(types.String); ok && !keep(n.ValueString()) {
			continue
		}
		elems = append(elems, e)
	}
	if len(elems) == len(plan.Elements()) {
		return plan
	}
	return types.ListValueMust(plan.ElementType(ctx), elems)
}

// fillImported restores what the machines tell of an imported resource: the version they all
// have, the revision their annotations record as done (else the version's), and the defaults
// of the optional attributes. Patches, extensions and timeouts cannot be restored.
func (m *Model) fillImported(obs *owners.Observation) {
	if m.Version.IsNull() {
		if v := obs.CommonVersion(); v != "" {
			m.Version = types.StringValue(v)
		}
	}
	rev := obs.OwnerRevision
	if rev == "" {
		rev = owners.Revision(inplace.Change{Version: m.Version.ValueString()})
	}
	m.Revision = types.StringValue(rev)
	if m.Fallback.IsNull() {
		m.Fallback = types.StringValue(defaultFallback)
	}
	if m.UpdateLimit.IsNull() {
		m.UpdateLimit = types.StringValue("1")
	}
	if m.MaxFailures.IsNull() {
		m.MaxFailures = types.StringValue("0")
	}
	if m.BootstrapDigest.IsNull() {
		m.BootstrapDigest = types.StringValue("")
	}
	if m.Verify.IsNull() {
		m.Verify = types.ObjectValueMust(verifyAttrTypes, map[string]attr.Value{"timeout": types.StringValue(defaultVerifyTimeout)})
	}
}

// ImportState takes `namespace/cluster/machine_deployment` or `namespace/cluster/control-plane:name`;
// Read then restores what the Machines tell. A fleet update (clusters or owners picked by
// selector) is not imported: applying its configuration plans the clusters already done as
// current and changes nothing there.
func (r *updateResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	parts := strings.Split(req.ID, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || strings.Contains(parts[2], "=") {
		resp.Diagnostics.AddError("Invalid Import ID",
			fmt.Sprintf("Import ID %q must be namespace/cluster/machine_deployment (e.g. fleet/prod-eu-1/prod-eu-1-md), or "+
				"namespace/cluster/control-plane:name for the Machines of a control plane. An update over clusters or owners picked by "+
				"selector is not imported: apply its configuration, which changes nothing on the clusters already done.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), parts[0])...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster"), parts[1])...)
	if cp, ok := strings.CutPrefix(parts[2], controlPlaneIDPrefix); ok {
		if cp == "" {
			resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("Import ID %q names no control plane after %q.", req.ID, controlPlaneIDPrefix))
			return
		}
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("control_plane"), cp)...)
	} else {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("machine_deployment"), parts[2])...)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}

// Destroy (fleetresource.Ops) does nothing: Delete forgets the resource, and in-place updates
// are not undone (the machines keep their version; nothing of the update is left to remove).
func (r *updateResource) Destroy(context.Context, time.Duration, *Model, fleetresource.PrivateGetter, *diag.Diagnostics) {
}

// shownMachines is what the plan Terraform showed says of each machine (the `plan` list), for
// the single-owner Apply's check that the plan made at apply is still that; nil when the list was unknown
// at plan (inputs unknown then), which compares with nothing.
func shownMachines(planned types.List) map[string]fleetupdate.Shown {
	if planned.IsNull() || planned.IsUnknown() {
		return nil
	}
	out := map[string]fleetupdate.Shown{}
	for _, e := range planned.Elements() {
		o, ok := e.(types.Object)
		if !ok {
			continue
		}
		a := o.Attributes()
		name, _ := a["name"].(types.String)
		strategy, _ := a["strategy"].(types.String)
		var exts []string
		if l, ok := a["extensions"].(types.List); ok {
			for _, x := range l.Elements() {
				if s, ok := x.(types.String); ok {
					exts = append(exts, s.ValueString())
				}
			}
		}
		out[name.ValueString()] = fleetupdate.Shown{Strategy: inplace.Strategy(strategy.ValueString()), Extensions: exts}
	}
	return out
}

// setSingleSummary fills summary, attention and waves for the single-owner form from its plan.
func (m *Model) setSingleSummary(ctx context.Context, res *fleetupdate.OwnerPlan) diag.Diagnostics {
	att := map[string]string{}
	if res.Attention != "" {
		att[m.Cluster.ValueString()] = res.Attention
	}
	var diags, d diag.Diagnostics
	m.Summary, d = types.MapValueFrom(ctx, types.Int64Type, res.Summary)
	diags.Append(d...)
	m.Attention, d = types.MapValueFrom(ctx, types.StringType, att)
	diags.Append(d...)
	m.Waves = types.StringValue(fleetresource.WavesText(res.Waves, 0))
	return diags
}
