package inplaceupdate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/live"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
)

const defaultApplyTimeout = 60 * time.Minute

// NewResource returns the `gradual_inplace_update` resource.
func NewResource() resource.Resource { return &updateResource{} }

type updateResource struct{ data *providerdata.Data }

var (
	_ resource.ResourceWithConfigure  = (*updateResource)(nil)
	_ resource.ResourceWithModifyPlan = (*updateResource)(nil)
)

// Model is the resource's configuration and state.
type Model struct {
	Input
	ID          types.String   `tfsdk:"id"`
	UpdateLimit types.Int64    `tfsdk:"update_limit"`
	Verify      types.Object   `tfsdk:"verify"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
	Revision    types.String   `tfsdk:"revision"`
	Plan        types.List     `tfsdk:"plan"`
	Status      types.Map      `tfsdk:"status"`
}

func (r *updateResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_inplace_update"
}

func (r *updateResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

func (m *Model) id() types.String {
	if m.MachineDeployment.ValueString() != "" {
		return types.StringValue(m.Namespace.ValueString() + "/" + m.Cluster.ValueString() + "/" + m.MachineDeployment.ValueString())
	}
	var keys []string
	for k, v := range m.Selector.Elements() {
		keys = append(keys, k+"="+strings.Trim(v.String(), `"`))
	}
	sort.Strings(keys)
	return types.StringValue(m.Namespace.ValueString() + "/" + m.Cluster.ValueString() + "/" + strings.Join(keys, ","))
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
// plan and status, so a re-plan after a successful apply is empty.
func (r *updateResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan Model
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var prior *Model
	if !req.State.Raw.IsNull() {
		prior = &Model{}
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	if r.data == nil || !plan.known() {
		plan.Revision, plan.Plan, plan.Status = types.StringUnknown(), types.ListUnknown(types.ObjectType{AttrTypes: machineAttrTypes}), types.MapUnknown(types.StringType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	plan.ID = plan.id()
	request, diags := plan.request(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := planner(r.data).Plan(ctx, request)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "In-Place Update Plan Failed"))
		return
	}
	for _, n := range res.Notes {
		resp.Diagnostics.AddWarning("In-Place Update Plan", n)
	}
	if err := res.Plan.Err(); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("fallback"), "Machines Cannot Be Updated In Place",
			"No update extension covers these changes, and fallback is \"none\":\n"+indent(err.Error()))
		return
	}
	for _, m := range res.Plan.Machines {
		tflog.Info(ctx, fmt.Sprintf("in-place plan: machine %s (node %s): %s %v by %v", m.Machine, m.Node, m.Strategy, m.Changed, m.Extensions))
	}
	plan.Revision = types.StringValue(res.Revision)
	nothingToDo := res.Plan.Counts()[inplace.StrategyUnchanged] == len(res.Plan.Machines)
	if nothingToDo && prior != nil && !prior.Plan.IsNull() && prior.Revision.ValueString() == res.Revision {
		plan.Plan, plan.Status = prior.Plan, prior.Status
	} else {
		plan.Plan, diags = machinesValue(res.Plan)
		resp.Diagnostics.Append(diags...)
		plan.Status = types.MapUnknown(types.StringType)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *updateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan Model
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultApplyTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, timeout, &plan, &resp.Diagnostics)
	// Saved even on failure: status shows which machines were updated (Terraform then taints
	// the resource; replacing it changes nothing but re-runs the update).
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *updateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan Model
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultApplyTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, timeout, &plan, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// apply plans again against the live machines and executes the plan, filling plan's computed
// attributes with what was done.
func (r *updateResource) apply(ctx context.Context, timeout time.Duration, plan *Model, diags *diag.Diagnostics) {
	if r.data == nil {
		diags.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return
	}
	plan.ID = plan.id()
	request, d := plan.request(ctx)
	diags.Append(d...)
	verify, d := plan.verifyTimeout(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := planner(r.data)
	res, err := p.Plan(ctx, request)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "In-Place Update Plan Failed"))
		plan.fillUnknown()
		return
	}
	plan.Revision = types.StringValue(res.Revision)
	if plan.Plan.IsUnknown() {
		plan.Plan, d = machinesValue(res.Plan)
		diags.Append(d...)
	}
	exec, err := p.Execute(ctx, res, live.ExecuteRequest{
		UpdateLimit: int(plan.UpdateLimit.ValueInt64()), VerifyTimeout: verify,
		Logf: func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
	})
	status := map[string]string{}
	if exec != nil {
		status = exec.Status
	}
	if plan.Status.IsUnknown() {
		plan.Status, d = types.MapValueFrom(ctx, types.StringType, status)
		diags.Append(d...)
	}
	if err != nil {
		diags.Append(diagnostics.FromError(err, "In-Place Update Failed"))
	}
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
}

// Read keeps the state: the next plan compares it with the live machines (ModifyPlan).
func (r *updateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state Model
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete forgets the resource: in-place updates are not undone.
func (r *updateResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
