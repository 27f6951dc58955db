package rollout

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
)

// statusModel is the data source's data.
type statusModel struct {
	fleetresource.StatusModel[clusterStatusModel]
	PreviewManifests types.String `tfsdk:"preview_manifests"`
	Revision         types.String `tfsdk:"revision"`
	Manifests        types.String `tfsdk:"manifests"`
}

type clusterStatusModel struct {
	Name       string   `tfsdk:"name"`
	State      string   `tfsdk:"state"`
	Revision   string   `tfsdk:"revision"`
	Backup     string   `tfsdk:"backup"`
	Detail     string   `tfsdk:"detail"`
	Drift      []string `tfsdk:"drift"`
	SkipReason string   `tfsdk:"skip_reason"`
	// Preview is what a dry-run of preview_manifests found; nil without preview_manifests and
	// for a skipped cluster.
	Preview *clusterPreviewModel `tfsdk:"preview"`
}

// clusterPreviewModel is one cluster's dry-run of preview_manifests (delivery.ClusterPreview).
type clusterPreviewModel struct {
	Created      int64    `tfsdk:"created"`
	Changed      int64    `tfsdk:"changed"`
	Unchanged    int64    `tfsdk:"unchanged"`
	Conflicting  int64    `tfsdk:"conflicting"`
	Rejected     int64    `tfsdk:"rejected"`
	Rejections   []string `tfsdk:"rejections"`
	Conflicts    []string `tfsdk:"conflicts"`
	NotPreviewed string   `tfsdk:"not_previewed"`
}

// StatusSchema implements fleetresource.StatusOps.
func (statusModel) StatusSchema() schema.Schema {
	computed := fleetresource.Computed
	return schema.Schema{
		MarkdownDescription: "Every cluster of a `gradual_rollout`, one by one: the revision it runs, its backup, its state and what is " +
			"wrong with it (drifted objects and fields, an interrupted apply).",
		Attributes: map[string]schema.Attribute{
			"preview_manifests": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "A bundle to dry-run now on every cluster the rollout picks, usually the rollout's next `manifests` " +
					"(`file(...)` of the same file). Each cluster's `preview` then says, from a server-side dry-run as the rollout's own " +
					"`preview` does at plan, what applying it would create, change or leave unchanged there, what another applier's " +
					"fields would conflict with, and what the API server rejects (schema, validation, admission) with its reason, nothing " +
					"written. The rollout's plan shows the same only as a warning sized for the fleet; here it is per cluster, for `check` " +
					"blocks and outputs, known at plan time (do not `depends_on` the rollout, or it is read after apply). The rollout's " +
					"`values`, `ignore_fields` and field manager apply; the dry-runs share a 30-second budget, and a cluster whose dry-run " +
					"did not finish in it says so in `not_previewed`. With `delivery.flux` no cluster is dry-run (the clusters are not " +
					"reached from here): every `not_previewed` says so.",
			},
			"revision": computed("The revision the rollout's last apply rolled out."),
			"manifests": schema.StringAttribute{
				Computed: true, Sensitive: true,
				MarkdownDescription: "The rollout's `manifests` as its last apply recorded them (never `sensitive_manifests`, which is not " +
					"recorded). Marked sensitive only so that the CLI does not print the whole text. It is the way back to a configuration " +
					"for an imported rollout: Terraform writes `manifests = null` into `-generate-config-out` configuration (it never " +
					"writes a sensitive value), and `manifests = data.gradual_rollout_status.<name>.manifests` (or the text saved to a " +
					"file) makes that configuration plan no change.",
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
					"preview": schema.SingleNestedAttribute{
						Computed:            true,
						MarkdownDescription: "What a dry-run of `preview_manifests` found on the cluster; null without `preview_manifests` and for a skipped cluster.",
						Attributes: map[string]schema.Attribute{
							"created":     schema.Int64Attribute{Computed: true, MarkdownDescription: "Objects applying would create (those in a namespace the bundle brings and the cluster lacks are counted without the server's word)."},
							"changed":     schema.Int64Attribute{Computed: true, MarkdownDescription: "Objects applying would change."},
							"unchanged":   schema.Int64Attribute{Computed: true, MarkdownDescription: "Objects applying would leave as they are."},
							"conflicting": schema.Int64Attribute{Computed: true, MarkdownDescription: "Objects with fields another server-side applier owns (apply fails on them unless `force_conflicts`)."},
							"rejected":    schema.Int64Attribute{Computed: true, MarkdownDescription: "Objects the API server rejects (apply would fail on them)."},
							"rejections": schema.ListAttribute{Computed: true, ElementType: types.StringType,
								MarkdownDescription: "Each rejected object with the server's reason, `Kind namespace/name: reason`."},
							"conflicts": schema.ListAttribute{Computed: true, ElementType: types.StringType,
								MarkdownDescription: "Each conflicting object with its fields and their owners."},
							"not_previewed": computed("Why the cluster has no preview (the budget ran out, its API did not answer, Flux delivery); empty when it has one."),
						},
					},
				}},
			},
		},
	}
}

// ObserveStatus implements fleetresource.StatusOps: every picked cluster as it is now, and, with
// preview_manifests, what a dry-run of them finds on each.
func (cfg *statusModel) ObserveStatus(ctx context.Context, data *providerdata.Data, key records.Key, raw []byte, recordNamespace string, diags *diag.Diagnostics) bool {
	var rollout Model
	rollout.Namespace = cfg.Namespace
	diags.Append(rollout.fromConfigRecord(ctx, raw)...)
	query, ds := rollout.query(ctx, data.Window())
	diags.Append(ds...)
	if diags.HasError() {
		return false
	}
	// The record keeps the revision (it covers sensitive_manifests and ignore_fields too); older
	// records only the manifests, whose own revision it then is.
	revision := rollout.Revision.ValueString()
	if revision == "" {
		var err error
		if revision, err = manifest.Revision(rollout.Manifests.ValueString()); err != nil {
			diags.AddError("Unreadable Rollout Record", "The manifests the record keeps cannot be read: "+err.Error())
			return false
		}
	}
	rollout.RecordNamespace, rollout.Revision = types.StringValue(recordNamespace), types.StringValue(revision)
	flux, ds := rollout.fluxSettings(ctx)
	diags.Append(ds...)
	obs, err := rollout.observe(ctx, data.Delivery.WithFlux(flux), query, key)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return false
	}
	summary, attention := summarize(revision, obs, nil)
	cfg.Revision, cfg.Summary, cfg.Clusters = types.StringValue(revision), summary, statusClusters(revision, obs, attention)
	cfg.Manifests = types.StringValue(rollout.Manifests.ValueString())
	if !cfg.PreviewManifests.IsNull() {
		previews, ds := previewStatus(ctx, data.Delivery.WithFlux(flux), key, &rollout, cfg.PreviewManifests.ValueString(), obs)
		diags.Append(ds...)
		if diags.HasError() {
			return false
		}
		for i := range cfg.Clusters {
			cfg.Clusters[i].Preview = previews[cfg.Clusters[i].Name]
		}
	}
	return true
}

// previewStatus dry-runs bundle, with the rest of the rollout's settings as its record keeps
// them, on each of obs' eligible clusters: what each would do with it, by cluster name.
func previewStatus(ctx context.Context, svc *delivery.Service, key records.Key, rollout *Model, bundle string, obs *delivery.Observation) (map[string]*clusterPreviewModel, diag.Diagnostics) {
	// The rollout's own key: its field manager is the one the dry-run applies with.
	rollout.Name = types.StringValue(key.Name)
	rollout.Manifests, rollout.Sensitive = manifesttype.NewValue(bundle), types.StringNull()
	rollout.Preview = types.StringValue(delivery.PreviewAll)
	spec, diags := rollout.spec(ctx)
	if diags.HasError() {
		return nil, diags
	}
	// Each cluster's variables from its Cluster as it reads now, as a plan renders them.
	if err := spec.Render(obs.Discovery.Clusters); err != nil {
		diags.AddAttributeError(path.Root("preview_manifests"), "Invalid Preview Manifests", err.Error())
		return nil, diags
	}
	clusters := slices.Sorted(maps.Keys(obs.Clusters))
	if len(clusters) == 0 {
		return nil, diags
	}
	found, err := svc.CheckAndPreview(ctx, spec, clusters, clusters)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Preview Manifests Cannot Be Applied"))
		return nil, diags
	}
	out := make(map[string]*clusterPreviewModel, len(clusters))
	for _, name := range clusters {
		p, ok := found.Clusters[name]
		switch {
		case found.Skipped != "":
			p.NotPreviewed = found.Skipped
		case !ok:
			p.NotPreviewed = "not dry-run"
		}
		m := &clusterPreviewModel{
			Created: int64(p.Counts.Created), Changed: int64(p.Counts.Changed), Unchanged: int64(p.Counts.Unchanged),
			Conflicting: int64(p.Counts.Conflicting), Rejected: int64(p.Counts.Rejected),
			Rejections: []string{}, Conflicts: append([]string{}, p.Conflicts...), NotPreviewed: p.NotPreviewed,
		}
		for _, r := range p.Rejected {
			m.Rejections = append(m.Rejections, r.String())
		}
		out[name] = m
	}
	return out, diags
}

// statusClusters lists every picked cluster, sorted by name.
func statusClusters(revision string, obs *delivery.Observation, attention map[string]string) []clusterStatusModel {
	out := make([]clusterStatusModel, 0, len(obs.Clusters)+len(obs.Skipped))
	for name, st := range obs.Clusters {
		state := stateOf(revision, st)
		drift := append([]string{}, st.Drift...)
		sort.Strings(drift)
		out = append(out, clusterStatusModel{Name: name, State: string(state), Revision: st.Revision, Backup: st.Backup, Detail: attention[name], Drift: drift})
	}
	for name, reason := range obs.Skipped {
		out = append(out, clusterStatusModel{Name: name, State: summarySkipped, SkipReason: reason, Drift: []string{}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
