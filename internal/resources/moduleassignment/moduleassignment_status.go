package moduleassignment

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

type statusModel struct {
	fleetresource.StatusModel[clusterStatusModel]
	Revisions map[string]string `tfsdk:"revisions"`
	Manifests map[string]string `tfsdk:"manifests"`
}

type clusterStatusModel struct {
	Name     string         `tfsdk:"name"`
	State    string         `tfsdk:"state"`
	Detail   string         `tfsdk:"detail"`
	Bindings []bindingModel `tfsdk:"bindings"`
}

type bindingModel struct {
	Module    string   `tfsdk:"module"`
	Revision  string   `tfsdk:"revision"`
	AppliedAt string   `tfsdk:"applied_at"`
	Result    string   `tfsdk:"result"`
	Reason    string   `tfsdk:"reason"`
	Drift     []string `tfsdk:"drift"`
}

// StatusSchema implements fleetresource.StatusOps.
func (statusModel) StatusSchema() schema.Schema {
	computed := fleetresource.Computed
	return schema.Schema{
		MarkdownDescription: "Every cluster of a `gradual_module_assignment`, one by one, with its bindings (like Cluster API's " +
			"ClusterResourceSetBindings): per module the revision, when it was applied, the result, and the objects and fields that " +
			"drifted.",
		Attributes: map[string]schema.Attribute{
			"manifests": schema.MapAttribute{
				Computed: true, Sensitive: true, ElementType: types.StringType,
				MarkdownDescription: "Per module, its `manifests` as the assignment's last apply recorded them (never `sensitive_manifests`, " +
					"which is not recorded). Marked sensitive only so that the CLI does not print the whole text. It is the way back to a " +
					"configuration for an imported assignment: Terraform writes `manifests = null` into `-generate-config-out` " +
					"configuration (it never writes a sensitive value), and `manifests = data.gradual_module_assignment_status.<name>.manifests[\"<module>\"]` " +
					"(or the text saved to a file) makes that configuration plan no change.",
			},
			"revisions": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Per module, the revision the assignment's last apply delivered.",
			},
			"clusters": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "Every picked cluster (and every cluster leaving), sorted by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":   computed("Cluster name."),
					"state":  computed("The cluster's state, as counted in `summary`: its worst module's."),
					"detail": computed("What is wrong, as in the assignment's `attention` (for skipped clusters, the reason); empty when current."),
					"bindings": schema.ListNestedAttribute{
						Computed:            true,
						MarkdownDescription: "One per configured module, in `depends_on` order.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"module":     computed("Module name."),
							"revision":   computed("Revision bound on the cluster (empty: none yet)."),
							"applied_at": computed("When it was applied and verified (RFC 3339; empty: not applied)."),
							"result": computed("`applied`, `failed` (restored), `blocked` (a module it depends on is not applied), " +
								"`drifted` (applied, but its objects are missing or edited), or empty when not bound yet."),
							"reason": computed("Why it failed or is blocked."),
							"drift": schema.ListAttribute{
								Computed: true, ElementType: types.StringType,
								MarkdownDescription: "The objects that are missing or edited, with the fields that differ (never their values); with `values`, the objects the module renders differently for the cluster now (the cluster's state is then `values-changed`).",
							},
						}},
					},
				}},
			},
		},
	}
}

// ObserveStatus implements fleetresource.StatusOps: every cluster's bindings as they are now.
func (cfg *statusModel) ObserveStatus(ctx context.Context, data *providerdata.Data, _ records.Key, raw []byte, recordNamespace string, diags *diag.Diagnostics) bool {
	m := Model{Namespace: cfg.Namespace, Name: cfg.Name, RecordNamespace: types.StringValue(recordNamespace)}
	diags.Append(m.fromConfigRecord(ctx, raw)...)
	if diags.HasError() {
		return false
	}
	spec, ds := m.spec(ctx)
	diags.Append(ds...)
	m.keepSensitiveRevisions(ctx, &spec)
	query, ds := m.query(ctx, data.Window())
	diags.Append(ds...)
	if diags.HasError() {
		return false
	}
	// The records are where the assignment's engine keeps them (delivery.flux: the management
	// cluster).
	flux, ds := m.fluxSettings(ctx)
	diags.Append(ds...)
	obs, err := assignment.Observe(ctx, data.Delivery.WithFlux(flux), query, spec, true)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return false
	}
	status := assignment.Status(obs, spec)
	cfg.Summary, _ = assignment.Summarize(status)
	cfg.Revisions = map[string]string{}
	cfg.Manifests, ds = recordedManifests(ctx, &m)
	diags.Append(ds...)
	for _, mod := range spec.Modules {
		cfg.Revisions[mod.Name] = mod.Revision
	}
	cfg.Clusters = make([]clusterStatusModel, 0, len(status))
	for _, cs := range status {
		cfg.Clusters = append(cfg.Clusters, clusterStatusOf(cs))
	}
	return true
}

// clusterStatusOf is one cluster's status with its bindings.
func clusterStatusOf(cs assignment.ClusterStatus) clusterStatusModel {
	c := clusterStatusModel{Name: cs.Name, State: string(cs.State), Detail: cs.Detail, Bindings: []bindingModel{}}
	for _, ms := range cs.Modules {
		result := ms.Result
		if ms.State == delivery.StateDrifted && result == records.BindingApplied {
			result = records.BindingDrifted
		}
		drift := ms.Drift
		if drift == nil {
			drift = []string{}
		}
		c.Bindings = append(c.Bindings, bindingModel{Module: ms.Module, Revision: ms.Revision, AppliedAt: appliedAt(ms.AppliedAt),
			Result: string(result), Reason: ms.Reason, Drift: drift})
	}
	return c
}

func appliedAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// recordedManifests is each module's public manifests as m (read from the record) holds them.
func recordedManifests(ctx context.Context, m *Model) (map[string]string, diag.Diagnostics) {
	mods, diags := m.modules(ctx)
	out := make(map[string]string, len(mods))
	for _, mod := range mods {
		out[mod.Name.ValueString()] = mod.Manifests.ValueString()
	}
	return out, diags
}
