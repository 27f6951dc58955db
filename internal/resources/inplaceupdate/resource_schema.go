package inplaceupdate

import (
	"context"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

const defaultVerifyTimeout = "10m"

var verifyAttrTypes = map[string]attr.Type{"timeout": types.StringType}

func (r *updateResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	strs := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		Version: 1,
		MarkdownDescription: "Changes the desired state of a MachineDeployment or KubeadmControlPlane and lets Cluster API (v1.12+, feature " +
			"gate `InPlaceUpdates`) update its machines, in place where its runtime update extensions cover the change. `terraform plan` " +
			"previews, per machine, what Cluster API will do: it sends the extensions the `CanUpdateMachine` requests CAPI would send " +
			"(CAPI's wire types) and shows the node, the changed fields, the strategy (`in-place` by which extension, or replaced) and the " +
			"fields that force a replacement; `fallback = \"none\"` refuses the plan when any machine would be replaced. " + descGate + " Apply creates the " +
			"rotated templates, writes the owner, and waits within `verify.timeout` until the owner has observed its generation, every " +
			"machine is `UpToDate` by CAPI's conditions, none is updating, replicas are all up to date and available, and every Node is " +
			"Ready on the expected kubelet version; a failure names the cluster, the owner and the machines. The provider never writes " +
			"Machines, infrastructure machines or bootstrap configs. If the extensions answer differently at apply than at plan (one " +
			"removed, or refusing), the apply stops before anything is written: the plan is stale. Destroying the resource changes nothing.\n\n" +
			"**One owner or a fleet.** `cluster` with `machine_deployment` or `control_plane` updates that one owner. With `names` or " +
			"`selector` (clusters, like the rollout's) and `update_control_plane` and/or `machine_deployment_selector` (owners in each " +
			"cluster), the update goes cluster by cluster in waves of at most `update_limit`, `canary` clusters first: each cluster's " +
			"control plane, then its MachineDeployments, each written and verified before the next. A cluster that is not up to date " +
			"within `verify.timeout` counts against `max_failures`; once they are exceeded no new wave starts (nothing is rolled back). " +
			"The plan shows `waves` (counts), `summary` and `attention` (skipped clusters, machines Cluster API would replace, unfinished " +
			"clusters), readable at any fleet size; `gradual_inplace_update_plan` gives the per-machine detail. Clusters already done " +
			"(every owner carries the revision and Cluster API is done with every machine) are left alone, so applying again after a " +
			"failure goes on where the update stopped.\n\n" +
			"**Managed topologies.** In a Cluster built from a ClusterClass (`spec.topology`), the topology controller owns the " +
			"version and template references of the control plane and MachineDeployments it made (label " +
			"`topology.cluster.x-k8s.io/owned`) and would put back what this resource writes, so such an owner is never written: " +
			"`control_plane`, `machine_deployment` or a `machine_deployment_selector` without `update_control_plane` that picks one is " +
			"refused at plan, naming it. With `update_control_plane = true` (and `cluster`, `names` or `selector`) such a cluster is " +
			"upgraded through its topology: apply writes `version` to `Cluster.spec.topology.version` and the named `topology_variables` to " +
			"`Cluster.spec.topology.variables` (by name, the others left as they are), in one write, and the revision to the Cluster; " +
			"and the topology controller upgrades the control plane, then every MachineDeployment it manages (selected or not); " +
			"Cluster API decides per machine whether it updates it in place. The plan previews them in that order, asking the " +
			"extensions `CanUpdateMachineSet`/`CanUpdateMachine` for every machine as for any owner, assuming the ClusterClass's " +
			"patches change nothing but the version. Verification waits for the Cluster's `TopologyReconciled` condition (its reason, " +
			"e.g. `ClusterUpgrading`, names what the topology controller waits for), the owners on the version, every machine up to " +
			"date and every Node Ready on the version. Refused at plan: spec patches (templates change through the ClusterClass, or " +
			"through the variables its patches read), neither `version` nor `topology_variables`, a version the ClusterClass's " +
			"`spec.kubernetesVersions` does not list, a downgrade, a variable the ClusterClass does not define, and variables Cluster " +
			"API's Cluster webhook refuses (a server-side dry run of the write, at plan). The ClusterClass's patches read the variables, " +
			"and the preview does not run them: with `topology_variables` the plan lists each variable's change (`from → to`) with its " +
			"clusters and warns that Cluster API may update in place or replace machines the preview shows unchanged or in place; " +
			"`version` may then be left unset (the variables alone). A variable set back on a Cluster after the apply is found by the " +
			"refresh and written again by the next apply; a Cluster without `spec.topology` that a `selector` picks is skipped, one named " +
			"is refused (see `topology_variables`). MachineDeployments the " +
			"topology did not make are written directly, after it, as in any other cluster.\n\n" +
			"**MachineHealthChecks.** Cluster API v1.14.2 does not hold a MachineHealthCheck's remediation back while a machine is " +
			"updated in place: it skips only paused Machines and those annotated `cluster.x-k8s.io/skip-remediation`, so an update " +
			"that trips a check (a Node condition past its timeout while the kubelet restarts, a Machine condition the check watches) " +
			"gets the machine remediated, that is deleted and replaced. The plan warns, per MachineHealthCheck of the namespace that " +
			"selects a machine planned in place (its selector and the cluster's name label, as Cluster API selects them), naming it, " +
			"the machines and its node startup timeout and unhealthy conditions with their timeouts (listing MachineHealthChecks " +
			"needs `list` on them in the namespace; without, the plan warns that it could not check). The provider never writes " +
			"Machines, so it does not annotate them: to keep the machines, make the timeouts longer than an update takes, limit " +
			"remediation with the check's `spec.remediation.triggerIf`, or annotate the Machines `cluster.x-k8s.io/skip-remediation` " +
			"yourself for the update.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/cluster/machine_deployment` or `namespace/cluster/control-plane:control_plane` for one owner of one cluster; `namespace/fleet:<sha>` (a hash of the cluster and owner selection) otherwise.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"namespace": schema.StringAttribute{Required: true, MarkdownDescription: descNamespace,
				Validators:    []validator.String{stringvalidator.LengthBetween(1, 63)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"cluster": schema.StringAttribute{Optional: true, MarkdownDescription: descCluster,
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.ExactlyOneOf(path.MatchRoot("cluster"), path.MatchRoot("names"), path.MatchRoot("selector")),
				},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"names":    fleetresource.ResourceNames(descNames),
			"selector": clusterSelector(),
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
			"machine_deployment_selector": machineDeploymentSelector(),
			"update_control_plane":        schema.BoolAttribute{Optional: true, MarkdownDescription: descUpdateControlPlane},
			"canary": schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: descCanary,
				Validators: []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))}},
			"max_failures": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("0"),
				MarkdownDescription: descMaxFailures, Validators: []validator.String{fleetresource.MaxFailures()}},
			"summary":   schema.MapAttribute{Computed: true, ElementType: types.Int64Type, MarkdownDescription: descSummary},
			"attention": schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: descAttention},
			"waves":     schema.StringAttribute{Computed: true, MarkdownDescription: descWaves},
			"version": schema.StringAttribute{Optional: true, MarkdownDescription: descVersion,
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^v\d+\.\d+\.\d+`), "must be a Kubernetes version such as v1.36.3")}},
			"machine_spec_patch": schema.StringAttribute{Optional: true, MarkdownDescription: descMachinePatch, Validators: []validator.String{jsonObject}},
			"topology_variables": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: descTopologyVariables + descTopologyVariablesRefresh,
				Validators: topologyVariablesValidators()},
			"infrastructure_machine_spec_patch": schema.StringAttribute{Optional: true, MarkdownDescription: descInfraPatch, Validators: []validator.String{jsonObject}},
			"bootstrap_config_spec_patch": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
				MarkdownDescription: descBootstrapPatch + " Write-only (Terraform and OpenTofu 1.11+): never in the plan or the state; `bootstrap_config_spec_patch_digest` and `revision` change with it, so a change still shows in the plan.",
				Validators:          []validator.String{jsonObject}},
			"bootstrap_config_spec_patch_digest": schema.StringAttribute{Computed: true,
				MarkdownDescription: "`sha256:` and the first 16 hex digits of the hash of `bootstrap_config_spec_patch` (normalised JSON); empty when unset. Changes with the patch, shows nothing of it."},
			"extensions": schema.ListNestedAttribute{
				Optional: true, MarkdownDescription: descExtensions,
				Validators: []validator.List{listvalidator.UniqueValues()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the extension, as plans and errors show it.",
						Validators: []validator.String{stringvalidator.LengthBetween(1, 63)}},
					"url":       schema.StringAttribute{Required: true, MarkdownDescription: "Base URL of the extension, `https://host[:port][/path]`; hooks are called at CAPI's paths below it. Plain HTTP is refused."},
					"ca_bundle": schema.StringAttribute{Optional: true, MarkdownDescription: "PEM CA bundle that signs the extension's serving certificate (not secret). Unset: the system roots."},
					"timeout": schema.StringAttribute{Optional: true, MarkdownDescription: "Timeout of one call, retries included, up to `30s`. Default `10s`.",
						Validators: []validator.String{fleetresource.Duration(time.Second, 30*time.Second)}},
				}},
			},
			"fallback": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultFallback),
				MarkdownDescription: descFallback, Validators: []validator.String{stringvalidator.OneOf("none", "rolling")}},
			"update_limit": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("1"),
				MarkdownDescription: descUpdateLimit, Validators: []validator.String{fleetresource.UpdateLimit()}},
			"verify": schema.SingleNestedAttribute{
				Optional: true, Computed: true,
				Default:             objectdefault.StaticValue(types.ObjectValueMust(verifyAttrTypes, map[string]attr.Value{"timeout": types.StringValue(defaultVerifyTimeout)})),
				MarkdownDescription: "How the update is verified: the owner and every machine up to date by CAPI's conditions and every Node Ready on the desired kubelet version, within `timeout`.",
				Attributes: map[string]schema.Attribute{
					"timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultVerifyTimeout),
						MarkdownDescription: "Longest wait for the whole owner, as a duration. Default `" + defaultVerifyTimeout + "`.",
						Validators:          []validator.String{fleetresource.Duration(time.Second, 0)}},
				},
			},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true}),
			"revision": str("Short hash of the change (version and patches, the write-only bootstrap patch included); the owner carries it in the `gradual.dev/inplace-update` annotation once written."),
			"plan": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: "The plan, per Machine sorted by name: " + descMachines[len("Per selected Machine, sorted by name: "):],
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":             str("Machine name."),
					"node":             str("The machine's Node."),
					"strategy":         str("`in-place`, `rolling`, `blocked` or `unchanged`."),
					"changed_fields":   strs("Spec fields that change."),
					"extensions":       strs("Extensions that update the machine in place."),
					"uncovered_fields": strs("Changed fields no extension covers."),
					"notes":            strs("Notes."),
					"coverage": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Per extension, the fields it covers.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"extension": str("Extension name."), "fields": strs("Fields it covers."),
						}}},
				}},
			},
			"status": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Per Machine after apply: `updated` (the same Machine, same UID, now up to date; also one the preview showed unchanged that Cluster API " +
					"moved to a new MachineSet and updated in place, as a topology variable the ClusterClass's patches read can make it), `replaced` (Cluster API replaced it), " +
					"`created` (a Machine Cluster API created meanwhile), `unchanged`, `failed` (not up to date when the wait ended) or `not-started`. " +
					"A refresh re-reads it from the Machines (specs, CAPI's conditions, Nodes): `drifted` when a Machine's specs were changed " +
					"outside Terraform, `updating` while Cluster API is not done with it, `unverified` when its Node is not Ready on the desired version."},
		},
	}
}
