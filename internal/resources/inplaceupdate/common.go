// Package inplaceupdate implements the `gradual_inplace_update_plan` data source and the
// `gradual_inplace_update` resource: Terraform glue around internal/inplace/owners, which
// reads the owner and its machines and asks the update extensions for the preview,
// internal/inplace/ownerupdate, which writes the change to the owner and waits for Cluster API
// to carry it out, and, for the fleet form, internal/inplace/fleetupdate, which plans and paces
// it over clusters.
package inplaceupdate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/fleetupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

const defaultFallback = "none"

// Input is what the data source and the resource share: which machines, what change, which
// extensions.
type Input struct {
	Namespace                      types.String `tfsdk:"namespace"`
	Cluster                        types.String `tfsdk:"cluster"`
	Names                          types.List   `tfsdk:"names"`
	Selector                       types.Object `tfsdk:"selector"`
	MachineDeployment              types.String `tfsdk:"machine_deployment"`
	ControlPlane                   types.String `tfsdk:"control_plane"`
	MachineDeploymentSelector      types.Object `tfsdk:"machine_deployment_selector"`
	UpdateControlPlane             types.Bool   `tfsdk:"update_control_plane"`
	Version                        types.String `tfsdk:"version"`
	MachineSpecPatch               types.String `tfsdk:"machine_spec_patch"`
	InfrastructureMachineSpecPatch types.String `tfsdk:"infrastructure_machine_spec_patch"`
	BootstrapConfigSpecPatch       types.String `tfsdk:"bootstrap_config_spec_patch"`
	TopologyVariables              types.Map    `tfsdk:"topology_variables"`
	Extensions                     types.List   `tfsdk:"extensions"`
	Fallback                       types.String `tfsdk:"fallback"`
}

// ExtensionModel is one `extensions` entry.
type ExtensionModel struct {
	Name     types.String `tfsdk:"name"`
	URL      types.String `tfsdk:"url"`
	CABundle types.String `tfsdk:"ca_bundle"`
	Timeout  types.String `tfsdk:"timeout"`
}

var coverageAttrTypes = map[string]attr.Type{
	"extension": types.StringType,
	"fields":    types.ListType{ElemType: types.StringType},
}

var machineAttrTypes = map[string]attr.Type{
	"name":             types.StringType,
	"node":             types.StringType,
	"strategy":         types.StringType,
	"changed_fields":   types.ListType{ElemType: types.StringType},
	"extensions":       types.ListType{ElemType: types.StringType},
	"coverage":         types.ListType{ElemType: types.ObjectType{AttrTypes: coverageAttrTypes}},
	"uncovered_fields": types.ListType{ElemType: types.StringType},
	"notes":            types.ListType{ElemType: types.StringType},
}

var countsAttrTypes = map[string]attr.Type{
	"total": types.Int64Type, "in_place": types.Int64Type, "rolling": types.Int64Type, "blocked": types.Int64Type, "unchanged": types.Int64Type,
}

// known reports whether every input is known (plans can be made only then).
func (in *Input) known() bool {
	for _, v := range []attr.Value{in.Namespace, in.Cluster, in.Names, in.Selector, in.MachineDeployment, in.ControlPlane, in.MachineDeploymentSelector,
		in.UpdateControlPlane, in.Version, in.MachineSpecPatch,
		in.InfrastructureMachineSpecPatch, in.BootstrapConfigSpecPatch, in.TopologyVariables, in.Extensions, in.Fallback} {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

// fleet reports whether the inputs pick owners by selector or clusters by more than one name:
// the update then goes cluster by cluster in waves (see fleet.go). One owner named in one
// cluster (`cluster` with `machine_deployment` or `control_plane`) is the single-owner form.
func (in *Input) fleet() bool {
	return in.Cluster.IsNull() || (in.MachineDeployment.IsNull() && in.ControlPlane.IsNull())
}

// planOwner plans the single-owner form from the inputs, as the resource's plan and the data
// source both do: the plan's notes as warnings, a blocked machine as an error at `fallback`
// (blocked ends the sentence that says so). nil when diags holds an error.
func (in *Input) planOwner(ctx context.Context, svc *fleetupdate.Service, blocked string, diags *diag.Diagnostics) *fleetupdate.OwnerPlan {
	spec, d := in.ownerSpec(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return nil
	}
	res, err := svc.Plan(ctx, spec, nil)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "In-Place Update Plan Failed"))
		return nil
	}
	for _, n := range res.Owner.Notes {
		diags.AddWarning("In-Place Update Plan", n)
	}
	if res.Blocked != nil {
		diags.AddAttributeError(path.Root("fallback"), inplace.BlockedSummary, inplace.BlockedLead+":\n"+indent(res.Blocked.Error())+blocked)
		return nil
	}
	return res.Owner
}

// ownerSpec is the single-owner form's spec for fleetupdate.Service (Plan, Apply).
func (in *Input) ownerSpec(ctx context.Context) (fleetupdate.Spec, diag.Diagnostics) {
	req, diags := in.request(ctx)
	return fleetupdate.Spec{Owner: &req.Selection, Change: req.Change, Fallback: req.Fallback, Endpoints: req.Endpoints}, diags
}

// request converts the inputs of the single-owner form. Attribute errors point at what is wrong.
func (in *Input) request(ctx context.Context) (owners.Request, diag.Diagnostics) {
	req := owners.Request{
		Selection: owners.Selection{
			Namespace: in.Namespace.ValueString(), Cluster: in.Cluster.ValueString(),
			MachineDeployment: in.MachineDeployment.ValueString(),
			ControlPlane:      in.ControlPlane.ValueString(),
		},
	}
	var diags diag.Diagnostics
	req.Change, req.Fallback, req.Endpoints, diags = in.change(ctx)
	if req.Selection.MachineDeployment == "" && req.Selection.ControlPlane == "" {
		diags.AddAttributeError(path.Root("machine_deployment"), "No Owner Selected", "Set machine_deployment or control_plane.")
	}
	return req, diags
}

// change converts what the update changes and how: the change itself, the fallback and the
// extensions to ask (nil: those of the ExtensionConfigs).
func (in *Input) change(ctx context.Context) (inplace.Change, inplace.Fallback, []extension.Endpoint, diag.Diagnostics) {
	var diags diag.Diagnostics
	change := inplace.Change{
		Version:                   in.Version.ValueString(),
		MachineSpec:               patchBytes(in.MachineSpecPatch),
		InfrastructureMachineSpec: patchBytes(in.InfrastructureMachineSpecPatch),
		BootstrapConfigSpec:       patchBytes(in.BootstrapConfigSpecPatch),
	}
	if !in.TopologyVariables.IsNull() && !in.TopologyVariables.IsUnknown() {
		var vars map[string]string
		diags.Append(in.TopologyVariables.ElementsAs(ctx, &vars, false)...)
		change.TopologyVariables = map[string]json.RawMessage{}
		for name, v := range vars {
			change.TopologyVariables[name] = json.RawMessage(v)
		}
	}
	fb := in.Fallback.ValueString()
	if fb == "" {
		fb = defaultFallback
	}
	fallback, err := inplace.ParseFallback(fb)
	if err != nil {
		diags.AddAttributeError(path.Root("fallback"), "Invalid Fallback", err.Error())
	}
	var endpoints []extension.Endpoint
	if !in.Extensions.IsNull() {
		var exts []ExtensionModel
		diags.Append(in.Extensions.ElementsAs(ctx, &exts, false)...)
		endpoints = []extension.Endpoint{}
		for i, e := range exts {
			ep := extension.Endpoint{Name: e.Name.ValueString(), URL: e.URL.ValueString(), CABundle: []byte(e.CABundle.ValueString())}
			if s := e.Timeout.ValueString(); s != "" {
				d, err := time.ParseDuration(s)
				if err != nil || d <= 0 || d > extension.MaxTimeout {
					diags.AddAttributeError(path.Root("extensions").AtListIndex(i).AtName("timeout"), "Invalid Extension Timeout",
						fmt.Sprintf("timeout %q must be a duration from 1s to %s.", s, extension.MaxTimeout))
				}
				ep.Timeout = d
			}
			endpoints = append(endpoints, ep)
		}
	}
	return change, fallback, endpoints, diags
}

func patchBytes(v types.String) []byte {
	if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
		return nil
	}
	return []byte(v.ValueString())
}

// machinesValue is the `machines` list of a plan.
func machinesValue(plan inplace.Plan) (types.List, diag.Diagnostics) {
	var diags diag.Diagnostics
	elems := make([]attr.Value, 0, len(plan.Machines))
	for _, m := range plan.Machines {
		cov := make([]attr.Value, 0, len(m.Coverage))
		for _, c := range m.Coverage {
			cov = append(cov, types.ObjectValueMust(coverageAttrTypes, map[string]attr.Value{
				"extension": types.StringValue(c.Extension), "fields": fieldList(c.Fields),
			}))
		}
		elems = append(elems, types.ObjectValueMust(machineAttrTypes, map[string]attr.Value{
			"name":             types.StringValue(m.Machine),
			"node":             types.StringValue(m.Node),
			"strategy":         types.StringValue(string(m.Strategy)),
			"changed_fields":   fieldList(m.Changed),
			"extensions":       stringList(m.Extensions),
			"coverage":         types.ListValueMust(types.ObjectType{AttrTypes: coverageAttrTypes}, cov),
			"uncovered_fields": fieldList(m.Uncovered),
			"notes":            stringList(m.Notes),
		}))
	}
	l, d := types.ListValue(types.ObjectType{AttrTypes: machineAttrTypes}, elems)
	diags.Append(d...)
	return l, diags
}

func countsValue(plan inplace.Plan) types.Object {
	c := plan.Counts()
	return types.ObjectValueMust(countsAttrTypes, map[string]attr.Value{
		"total":     types.Int64Value(int64(len(plan.Machines))),
		"in_place":  types.Int64Value(int64(c[inplace.StrategyInPlace])),
		"rolling":   types.Int64Value(int64(c[inplace.StrategyRolling])),
		"blocked":   types.Int64Value(int64(c[inplace.StrategyBlocked])),
		"unchanged": types.Int64Value(int64(c[inplace.StrategyUnchanged])),
	})
}

func fieldList(fields []inplace.Field) types.List {
	s := make([]string, len(fields))
	for i, f := range fields {
		s[i] = f.String()
	}
	return stringList(s)
}

func stringList(s []string) types.List {
	elems := make([]attr.Value, len(s))
	for i, v := range s {
		elems[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, elems)
}

// topologyVariablesValidators check `topology_variables` (data source and resource): names
// as Cluster API allows them, values JSON.
func topologyVariablesValidators() []validator.Map {
	return []validator.Map{
		mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 256)),
		mapvalidator.ValueStringsAre(jsonValue),
	}
}

// descTopologyVariables documents `topology_variables`.
const descTopologyVariables = "Values for named variables of a managed topology, each JSON-encoded: `{ name = jsonencode(value) }`, " +
	"e.g. `{ region = jsonencode(\"eu-west\"), workerNote = jsonencode(\"v2\") }`. Only with `update_control_plane = true` on Clusters built " +
	"from a ClusterClass (`spec.topology`): apply writes each to `Cluster.spec.topology.variables` by name, in the same write as " +
	"`version` (which may be unset: the variables alone), and leaves the Cluster's other variables as they are (per-MachineDeployment " +
	"`variables.overrides` too). Refused at plan, with nothing written: a name the ClusterClass does not define (`spec.variables`, " +
	"`status.variables`), a value that is not JSON, and whatever Cluster API's Cluster webhook refuses (the value against the " +
	"variable's schema), asked by a server-side dry run of the write. The ClusterClass's patches read variables, and the preview " +
	"does not run them: the plan shows each variable's change (from → to) with its clusters and warns that Cluster API may update " +
	"in place or replace machines the preview shows unchanged, and names, per cluster, the control plane and the MachineDeployments " +
	"(by their name in `spec.topology.workers.machineDeployments`) whose own `variables.overrides` of a changed variable keeps the change " +
	"from them. Verification waits for `TopologyReconciled` and every machine up to date. Clusters a `selector` picks that have no " +
	"`spec.topology` are skipped with the reason `no managed topology` (a `canary` among them refuses the plan); one named by `cluster` " +
	"or `names` is refused."

// descTopologyVariablesRefresh is what the resource's refresh does with `topology_variables`.
const descTopologyVariablesRefresh = " A refresh compares each variable with the " +
	"Cluster's value as JSON values (key order, spacing and number spelling aside): one changed on a Cluster since the apply (set back " +
	"by hand) puts that cluster in the next plan's waves again, with a `Topology Variables Changed Outside Terraform` warning naming " +
	"the cluster, the variable, the Cluster's value and the configured one."

// jsonValue checks that a string is JSON (any value: a topology variable's).
var jsonValue = fleetresource.StringCheck("must be JSON (jsonencode the value)", "Invalid Topology Variable", func(s string) error {
	if !json.Valid([]byte(s)) {
		detail := fmt.Sprintf("The value must be JSON: jsonencode it, e.g. jsonencode(\"eu-west\") or jsonencode({ replicas = 3 }); got %q.", s)
		return errors.New(detail)
	}
	return nil
})

// jsonObject checks that a string is a JSON object (a merge patch of a spec).
var jsonObject = fleetresource.StringCheck("must be a JSON object (a JSON merge patch of the spec)", "Invalid Spec Patch", func(s string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		detail := "The value must be a JSON object, a JSON merge patch (RFC 7386) of the spec, e.g. jsonencode({ ntp = { servers = [\"pool.ntp.org\"] } })."
		if err != nil {
			detail += " " + err.Error()
		}
		return errors.New(detail)
	}
	return nil
})
