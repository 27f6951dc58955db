package rollout

import (
	"context"
	"fmt"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// NewStatusDataSource returns the `gradual_rollout_status` data source: the per-cluster detail
// that the rollout's plan leaves out (it shows counts and the clusters needing attention), for
// outputs, `check` blocks and reviews of one cluster.
func NewStatusDataSource() datasource.DataSource { return &statusDataSource{} }

type statusDataSource struct{ data *providerdata.Data }

var _ datasource.DataSourceWithConfigure = (*statusDataSource)(nil)

// statusModel is the data source's data.
type statusModel struct {
	Namespace       types.String         `tfsdk:"namespace"`
	Name            types.String         `tfsdk:"name"`
	RecordNamespace types.String         `tfsdk:"record_namespace"`
	Revision        types.String         `tfsdk:"revision"`
	Summary         map[string]int64     `tfsdk:"summary"`
	Clusters        []clusterStatusModel `tfsdk:"clusters"`
}

type clusterStatusModel struct {
	Name       string   `tfsdk:"name"`
	State      string   `tfsdk:"state"`
	Revision   string   `tfsdk:"revision"`
	Backup     string   `tfsdk:"backup"`
	Detail     string   `tfsdk:"detail"`
	Drift      []string `tfsdk:"drift"`
	SkipReason string   `tfsdk:"skip_reason"`
}

func (d *statusDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rollout_status"
}

func (d *statusDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

func (d *statusDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(description string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: description}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every cluster of a `gradual_rollout`, one by one: the revision it runs, its backup, its state and what is " +
			"wrong with it (drifted objects and fields, an interrupted apply). The rollout's plan shows only counts (`summary`) and the " +
			"clusters needing attention, so that it stays readable at any fleet size; this is the detail, for outputs, `check` blocks " +
			"and a closer look. It reads the clusters the rollout's last apply picked (from the management cluster's record) as they " +
			"are now; depend on the rollout (`depends_on`) to read it after the rollout's apply.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Required: true, MarkdownDescription: "`namespace` of the rollout (of its Cluster objects)."},
			"name":      schema.StringAttribute{Required: true, MarkdownDescription: "`name` of the rollout."},
			"record_namespace": schema.StringAttribute{
				Optional: true, MarkdownDescription: "`record_namespace` of the rollout. Default `" + defaultRecordNamespace + "`.",
			},
			"revision": computed("The revision the rollout's last apply rolled out."),
			"summary": schema.MapAttribute{
				Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "How many clusters are in each state, as the rollout's `summary`.",
			},
			"clusters": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "Every picked cluster, sorted by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":     computed("Cluster name."),
					"state":    computed("`current`, `outdated`, `drifted`, `values-changed` (with `values`: the manifests render differently for it now), `provisioning`, `pending` or `skipped`."),
					"revision": computed("Revision the cluster runs (empty: none)."),
					"backup":   computed("Revision the cluster returns to on failure (empty: none)."),
					"detail":   computed("What is wrong, as in the rollout's `attention`; empty when current."),
					"drift": schema.ListAttribute{
						Computed: true, ElementType: types.StringType,
						MarkdownDescription: "The objects that are missing or edited, with the fields that differ (never their values).",
					},
					"skip_reason": computed("Why the rollout leaves the cluster alone now; empty unless `state` is `skipped`."),
				}},
			},
		},
	}
}

func (d *statusDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg statusModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.data == nil {
		resp.Diagnostics.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return
	}
	recordNamespace := cfg.RecordNamespace.ValueString()
	if recordNamespace == "" {
		recordNamespace = defaultRecordNamespace
	}
	key := records.Key{Kind: "rollout", Namespace: cfg.Namespace.ValueString(), Name: cfg.Name.ValueString()}
	raw, err := d.data.Delivery.LoadConfig(ctx, key, recordNamespace)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Rollout's Record"))
		return
	}
	if raw == nil {
		resp.Diagnostics.AddError("Rollout Not Found", fmt.Sprintf("No records of rollout %s exist in the management cluster (namespace %q): "+
			"it was never applied, or it was destroyed. Depend on the rollout (depends_on) to read it after its first apply.", key, recordNamespace))
		return
	}
	var rollout Model
	rollout.Namespace = cfg.Namespace
	resp.Diagnostics.Append(rollout.fromConfigRecord(ctx, raw)...)
	query, diags := rollout.query(ctx, d.data.Window())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The record keeps the revision (it covers sensitive_manifests and ignore_fields too); older
	// records only the manifests, whose own revision it then is.
	revision := rollout.Revision.ValueString()
	if revision == "" {
		if revision, err = manifest.Revision(rollout.Manifests.ValueString()); err != nil {
			resp.Diagnostics.AddError("Unreadable Rollout Record", "The manifests the record keeps cannot be read: "+err.Error())
			return
		}
	}
	rollout.RecordNamespace, rollout.Revision = types.StringValue(recordNamespace), types.StringValue(revision)
	flux, diags := rollout.fluxSettings(ctx)
	resp.Diagnostics.Append(diags...)
	obs, err := rollout.observe(ctx, d.data.Delivery.WithFlux(flux), query, key)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	summary, attention := summarize(revision, obs, nil)
	cfg.Revision, cfg.Summary, cfg.Clusters = types.StringValue(revision), summary, statusClusters(revision, obs, attention)
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

// statusClusters lists every picked cluster, sorted by name.
func statusClusters(revision string, obs *delivery.Observation, attention map[string]string) []clusterStatusModel {
	out := make([]clusterStatusModel, 0, len(obs.Clusters)+len(obs.Skipped))
	for name, st := range obs.Clusters {
		state := stateOf(revision, st)
		drift := append([]string{}, st.Drift...)
		sort.Strings(drift)
		out = append(out, clusterStatusModel{Name: name, State: state, Revision: st.Revision, Backup: st.Backup, Detail: attention[name], Drift: drift})
	}
	for name, reason := range obs.Skipped {
		out = append(out, clusterStatusModel{Name: name, State: summarySkipped, SkipReason: reason, Drift: []string{}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
