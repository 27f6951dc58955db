package inplaceupdate

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// NewPlanDataSource returns the `gradual_inplace_update_plan` data source.
func NewPlanDataSource() datasource.DataSource { return &planDataSource{} }

type planDataSource struct{ data *providerdata.Data }

var _ datasource.DataSourceWithConfigure = (*planDataSource)(nil)

// PlanModel is the data source's configuration and result.
type PlanModel struct {
	Input
	Clusters types.Map    `tfsdk:"clusters"`
	Skipped  types.Map    `tfsdk:"skipped"`
	Revision types.String `tfsdk:"revision"`
	Machines types.List   `tfsdk:"machines"`
	Counts   types.Object `tfsdk:"counts"`
}

func (d *planDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_inplace_update_plan"
}

func (d *planDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

// Descriptions shared by the data source and the resource.
const (
	descNamespace         = "Namespace of the Cluster API objects (Cluster, MachineDeployment, Machines) in the management cluster."
	descCluster           = "Name of the one CAPI `Cluster` whose machines are updated. Exactly one of `cluster`, `names` and `selector`."
	descMachineDeployment = "The MachineDeployment to update: the change is written to its `spec.template` (version; infrastructure and bootstrap templates rotated: copied with the patch applied under a new content-hashed name `<name>-gip-<hash>`, never edited in place) and Cluster API updates its Machines, in place where the extensions cover the change. Its rollout strategy decides how: with `maxSurge` above 0 Cluster API creates new Machines first and replaces old ones even when an extension covers them, so in-place updates want `maxSurge = 0`, `maxUnavailable` ≥ 1. With `cluster` only; a fleet picks MachineDeployments with `machine_deployment_selector`."
	descControlPlane      = "The KubeadmControlPlane to update: its `spec.version`, `spec.kubeadmConfigSpec` (`bootstrap_config_spec_patch`) and machine template (`infrastructure_machine_spec_patch`, rotated like a MachineDeployment's) change, and the KubeadmControlPlane updates its Machines. It updates a Machine in place only where it would otherwise delete one: with `spec.rollout.strategy.rollingUpdate.maxSurge = 0` (allowed from 3 replicas) every Machine, one at a time; with its default `maxSurge` 1 it creates a new Machine first and deletes an old one, so a one-replica control plane is replaced whatever the extensions cover (the plan says so). With `cluster` only (a fleet uses `update_control_plane`); `machine_spec_patch` is refused (a KubeadmControlPlane has no Machine spec of its own)."
	descVersion           = "Kubernetes version for the owner (MachineDeployment `spec.template.spec.version`, KubeadmControlPlane `spec.version`), e.g. `v1.36.3`. Unset leaves it."
	descMachinePatch      = "JSON merge patch (RFC 7386) of the MachineDeployment's `spec.template.spec` (the Machine spec), e.g. `jsonencode({...})`."
	descInfraPatch        = "JSON merge patch of the infrastructure machine template's `spec.template.spec`: the template is rotated (copied with the patch applied under a new name) and the owner pointed at the copy."
	descBootstrapPatch    = "JSON merge patch of the bootstrap config's `spec` (e.g. a KubeadmConfig's `files` or `ntp`): merged into a rotated copy of the MachineDeployment's bootstrap template, or into a KubeadmControlPlane's `spec.kubeadmConfigSpec`. Sensitive: bootstrap files often carry keys and tokens."
	descExtensions        = "Update extensions to ask, explicitly, instead of those registered in the management cluster: for extensions the machine running Terraform reaches directly by `url`, verified with `ca_bundle`. List the extensions Cluster API calls: the plan predicts Cluster API's verdict from them, so two listed extensions serving one in-place hook block as two registered ones do. " +
		"Unset: every `ExtensionConfig` of the management cluster that serves the namespace (its `namespaceSelector`), asked through its Discovery hook. One with a `url` is called directly and its `caBundle` verifies the certificate. One with a `service` (how extensions are installed in clusters) is called through the management API server's service proxy " +
		"(`/api/v1/namespaces/<namespace>/services/https:<name>:<port>/proxy/<path>`, port 443 unless given) with the provider's own connection, which needs `create` on `services/proxy` in the Service's namespace, and `get` on Services and `list` on EndpointSlices there to check first that the Service has a ready endpoint for the port (one without fails the plan, naming the ExtensionConfig and the Service; nothing is written). " +
		"Through the proxy the API server makes the TLS connection to the extension and does not verify its certificate (it dials endpoint IPs), so the `caBundle` verifies nothing there: the connection to the API server is verified as every other, the last hop is the cluster's network. " +
		"Cluster API v1.14 calls exactly one extension handler per in-place hook (`CanUpdateMachine` for a control plane, `CanUpdateMachineSet` for a MachineDeployment, `UpdateMachine` for both) and stops the rollout with an error (\"found multiple … hooks\") when several are registered; the plan follows that rule over the extensions it asks: the machines that change are then `blocked` whatever `fallback`, with a note naming the handlers."
	descFallback = "What happens to a machine Cluster API would replace (no extension covers its change, the owner's `maxSurge`, or the `InPlaceUpdates` feature gate off): `none` fails the plan naming the machine and why; `rolling` lets Cluster API replace it. Default `none`. A machine Cluster API would neither update nor replace, because it would stop with an error (several extensions for one in-place hook, or an extension covering the change but none serving `UpdateMachine`), is `blocked` whatever the fallback."
	descGate     = "Cluster API updates machines in place only with its `InPlaceUpdates` feature gate on (alpha, off by default up to v1.14). The plan reads the gate from the `--feature-gates` flag of the managers' Deployments in the management cluster (labelled `cluster.x-k8s.io/provider` `cluster-api` for MachineDeployments, `control-plane-kubeadm` for control planes, as clusterctl, the Cluster API operator and the Helm charts install them; listing Deployments needs read access to `apps/v1` Deployments in every namespace): with the gate off, every machine that changes is shown replaced with the note \"Cluster API's InPlaceUpdates feature gate is off\", no extension is asked, and `fallback = \"none\"` refuses the plan. Nothing on Machines or their owners shows the gate, so when no such Deployment can be read (the managers run elsewhere, or the provider may not list Deployments) the plan warns that it cannot tell and shows what the extensions answer."
	descMachines = "Per selected Machine, sorted by name: its `node`, the `changed_fields`, the `strategy` (`in-place`, `rolling`, `blocked`, `unchanged`), the `extensions` that cover it (and what each covers, `coverage`), the `uncovered_fields` and `notes`."
)

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

func (d *planDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	strs := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	count := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Plans an in-place update of the machines of a MachineDeployment, a control plane or selected Machines, read-only: " +
			"the change between their current and desired Machine, infrastructure machine and bootstrap config specs, and, from " +
			"each update extension's `CanUpdateMachine` answer (CAPI runtime extensions), which machine is updated in place by " +
			"which extension, which would be replaced, and which no extension covers. " + descGate + " For review and `check` blocks; the " +
			"`gradual_inplace_update` resource carries the same plan out.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Required: true, MarkdownDescription: descNamespace,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 63)}},
			"cluster": schema.StringAttribute{Optional: true, MarkdownDescription: descCluster,
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.ExactlyOneOf(path.MatchRoot("cluster"), path.MatchRoot("names"), path.MatchRoot("selector")),
				}},
			"names":    withDescription(fleetresource.DataSourceNames(), descNames),
			"selector": selectorWithDescription(fleetresource.DataSourceSelector(), descClusterSelector),
			"machine_deployment": schema.StringAttribute{Optional: true, MarkdownDescription: descMachineDeployment,
				Validators: []validator.String{
					stringvalidator.RegexMatches(dnsName, "must be a Kubernetes object name"),
					stringvalidator.ConflictsWith(path.MatchRoot("control_plane"), path.MatchRoot("machine_deployment_selector"), path.MatchRoot("update_control_plane")),
				}},
			"control_plane": schema.StringAttribute{Optional: true, MarkdownDescription: descControlPlane,
				Validators: []validator.String{
					stringvalidator.RegexMatches(dnsName, "must be a Kubernetes object name"),
					stringvalidator.ConflictsWith(path.MatchRoot("machine_deployment_selector"), path.MatchRoot("update_control_plane")),
				}},
			"machine_deployment_selector": selectorWithDescription(fleetresource.DataSourceSelector(), descMachineDeploymentSelector),
			"update_control_plane":        schema.BoolAttribute{Optional: true, MarkdownDescription: descUpdateControlPlane},
			"clusters": schema.MapAttribute{Computed: true, ElementType: types.ListType{ElemType: types.StringType},
				MarkdownDescription: "Per picked cluster that is not skipped, the names of its machines in `machines`."},
			"skipped": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Picked clusters that cannot be updated now, with the reason."},
			"version": schema.StringAttribute{Optional: true, MarkdownDescription: descVersion,
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^v\d+\.\d+\.\d+`), "must be a Kubernetes version such as v1.36.3")}},
			"machine_spec_patch": schema.StringAttribute{Optional: true, MarkdownDescription: descMachinePatch, Validators: []validator.String{jsonObject}},
			"topology_variables": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: descTopologyVariables,
				Validators: topologyVariablesValidators()},
			"infrastructure_machine_spec_patch": schema.StringAttribute{Optional: true, MarkdownDescription: descInfraPatch, Validators: []validator.String{jsonObject}},
			"bootstrap_config_spec_patch":       schema.StringAttribute{Optional: true, Sensitive: true, MarkdownDescription: descBootstrapPatch, Validators: []validator.String{jsonObject}},
			"extensions": schema.ListNestedAttribute{
				Optional: true, MarkdownDescription: descExtensions,
				Validators: []validator.List{listvalidator.UniqueValues()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the extension, as plans and errors show it.",
						Validators: []validator.String{stringvalidator.LengthBetween(1, 63)}},
					"url": schema.StringAttribute{Required: true, MarkdownDescription: "Base URL of the extension, `https://host[:port][/path]`; hooks are called at CAPI's paths below it. Plain HTTP is refused.",
						Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://`), "must be a URL")}},
					"ca_bundle": schema.StringAttribute{Optional: true, MarkdownDescription: "PEM CA bundle that signs the extension's serving certificate (not secret). Unset: the system roots."},
					"timeout": schema.StringAttribute{Optional: true, MarkdownDescription: "Timeout of one call, retries included, as a duration up to `30s`. Default `10s`.",
						Validators: []validator.String{fleetresource.Duration(time.Second, 30*time.Second)}},
				}},
			},
			"fallback": schema.StringAttribute{Optional: true, MarkdownDescription: descFallback,
				Validators: []validator.String{stringvalidator.OneOf("none", "rolling")}},
			"revision": str("Short hash of the change (version and patches): the value Machines are annotated with once updated."),
			"machines": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: descMachines,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":             str("Machine name."),
					"node":             str("The machine's Node in the workload cluster (`status.nodeRef`), empty when it has none."),
					"strategy":         str("`in-place`, `rolling` (replaced), `blocked` (no extension covers it; fallback none) or `unchanged`."),
					"changed_fields":   strs("Spec fields that change, e.g. `machine spec.version`, `bootstrapConfig spec.ntp`."),
					"extensions":       strs("Extensions whose `UpdateMachine` updates the machine, in order."),
					"uncovered_fields": strs("Changed fields no extension covers."),
					"notes":            strs("Anything worth knowing: failed answers of extensions whose failure policy is Ignore, stray patches."),
					"coverage": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Per extension, the changed fields it covers.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"extension": str("Extension name."),
							"fields":    strs("Fields it covers."),
						}}},
				}},
			},
			"counts": schema.SingleNestedAttribute{Computed: true, MarkdownDescription: "How many machines take each strategy.",
				Attributes: map[string]schema.Attribute{
					"total": count("Selected machines."), "in_place": count("Updated in place."), "rolling": count("Replaced."),
					"blocked": count("Not covered (fallback none)."), "unchanged": count("Already as desired."),
				}},
		},
	}
}

func (d *planDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var model PlanModel
	if !d.data.Read(ctx, req.Config, &model, &resp.Diagnostics) {
		return
	}
	if model.fleet() {
		d.readFleet(ctx, &model, resp)
		return
	}
	res := model.planOwner(ctx, d.data.FleetUpdate, "", &resp.Diagnostics)
	if res == nil {
		return
	}
	var diags diag.Diagnostics
	model.Revision = types.StringValue(res.Revision)
	model.Machines, diags = machinesValue(res.Plan)
	resp.Diagnostics.Append(diags...)
	model.Counts = countsValue(res.Plan)
	model.Clusters, diags = types.MapValueFrom(ctx, types.ListType{ElemType: types.StringType}, map[string][]string{model.Cluster.ValueString(): machineNames(res.Plan)})
	resp.Diagnostics.Append(diags...)
	model.Skipped = types.MapValueMust(types.StringType, map[string]attr.Value{})
	resp.Diagnostics.Append(resp.State.Set(ctx, &model)...)
}

// readFleet plans over the picked clusters: every machine of every owner picked, by cluster.
func (d *planDataSource) readFleet(ctx context.Context, model *PlanModel, resp *datasource.ReadResponse) {
	spec, diags := model.fleetSpec(ctx, fleetLimits{})
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := fleetService(d.data).Plan(ctx, spec, nil)
	if err != nil {
		resp.Diagnostics.Append(fleetError(err, "In-Place Update Plan Failed", &model.Input))
		return
	}
	for _, n := range res.Notes {
		resp.Diagnostics.AddWarning("In-Place Update Plan", n)
	}
	if res.Blocked != nil {
		resp.Diagnostics.AddAttributeError(path.Root("fallback"), inplace.BlockedSummary,
			inplace.BlockedLead+":\n"+indent(res.Blocked.Error()))
		return
	}
	var all inplace.Plan
	clusters := map[string][]string{}
	for _, c := range res.Live.Clusters {
		if c.SkipReason != "" {
			continue
		}
		ms := c.Machines()
		all.Machines = append(all.Machines, ms...)
		clusters[c.Cluster] = machineNames(inplace.Plan{Machines: ms})
	}
	model.Revision = types.StringValue(res.Revision)
	model.Machines, diags = machinesValue(all)
	resp.Diagnostics.Append(diags...)
	model.Counts = countsValue(all)
	model.Clusters, diags = types.MapValueFrom(ctx, types.ListType{ElemType: types.StringType}, clusters)
	resp.Diagnostics.Append(diags...)
	model.Skipped, diags = types.MapValueFrom(ctx, types.StringType, res.Skipped)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, model)...)
}

func machineNames(p inplace.Plan) []string {
	out := make([]string, len(p.Machines))
	for i, m := range p.Machines {
		out[i] = m.Machine
	}
	return out
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func withDescription(a schema.ListAttribute, desc string) schema.ListAttribute {
	a.MarkdownDescription = desc
	return a
}

// selectorWithDescription is a label selector attribute; the choice between cluster, names and
// selector is checked on `cluster`.
func selectorWithDescription(a schema.SingleNestedAttribute, desc string) schema.SingleNestedAttribute {
	a.MarkdownDescription, a.Validators = desc, nil
	return a
}
