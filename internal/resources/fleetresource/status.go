package fleetresource

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// StatusOps is what the status data source of a resource that runs through the engine
// (`gradual_rollout_status`, `gradual_module_assignment_status`) supplies to StatusDataSource:
// which record its configuration names, how to load it, and how to observe and summarize the
// fleet that record picks. C is the data source's model.
type StatusOps[C any] interface {
	// StatusKey is the key of the resource cfg names, how diagnostics describe it ("rollout
	// fleet/x"), and the configured `record_namespace`.
	StatusKey(cfg *C) (key records.Key, described string, recordNamespace types.String)
	// LoadRecord loads the resource's configuration record; nil when there is none.
	LoadRecord(ctx context.Context, data *providerdata.Data, key records.Key, recordNamespace string) ([]byte, error)
	// ObserveStatus reads the fleet the record raw picks as it is now and fills cfg from it. It
	// reports whether cfg is to be saved (an error found after the read still saves it).
	ObserveStatus(ctx context.Context, data *providerdata.Data, cfg *C, raw []byte, recordNamespace string, diags *diag.Diagnostics) bool
}

// StatusKeyModel is the part of a status data source's model that names the resource, embedded
// in the model (the framework promotes its fields).
type StatusKeyModel struct {
	Namespace       types.String `tfsdk:"namespace"`
	Name            types.String `tfsdk:"name"`
	RecordNamespace types.String `tfsdk:"record_namespace"`
}

// StatusDataSource is the Configure and Read of a status data source: the provider check, the
// record lookup with its not-found diagnostic, then Ops.ObserveStatus. Embedded in the data
// source (with Ops set to it), it makes both status data sources read and refuse alike.
type StatusDataSource[C any] struct {
	Data *providerdata.Data
	Ops  StatusOps[C]
	// Title names the resource in diagnostic summaries ("Module Assignment"), Noun in their
	// text ("assignment"); DefaultRecordNamespace is read when `record_namespace` is unset;
	// TypeSuffix follows the provider's name in the data source's type ("_rollout_status").
	Title, Noun, DefaultRecordNamespace, TypeSuffix string
}

// NewStatus is a StatusDataSource (see its fields) reading through ops.
func NewStatus[C any](ops StatusOps[C], title, noun, typeSuffix, defaultRecordNamespace string) StatusDataSource[C] {
	return StatusDataSource[C]{Ops: ops, Title: title, Noun: noun, TypeSuffix: typeSuffix, DefaultRecordNamespace: defaultRecordNamespace}
}

// Metadata implements datasource.DataSource.
func (d *StatusDataSource[C]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + d.TypeSuffix
}

// StatusAttributes are a status data source's attributes: those that name the resource
// (`namespace`, `name`, `record_namespace`) and more.
func (d *StatusDataSource[C]) StatusAttributes(more map[string]schema.Attribute) map[string]schema.Attribute {
	attrs := map[string]schema.Attribute{
		"namespace": schema.StringAttribute{Required: true, MarkdownDescription: "`namespace` of the " + d.Noun + " (of its Cluster objects)."},
		"name":      schema.StringAttribute{Required: true, MarkdownDescription: "`name` of the " + d.Noun + "."},
		"record_namespace": schema.StringAttribute{
			Optional: true, MarkdownDescription: "`record_namespace` of the " + d.Noun + ". Default `" + d.DefaultRecordNamespace + "`.",
		},
	}
	for k, v := range more {
		attrs[k] = v
	}
	return attrs
}

// Computed is a computed string attribute of a data source.
func Computed(description string) schema.StringAttribute {
	return schema.StringAttribute{Computed: true, MarkdownDescription: description}
}

// Configure implements datasource.DataSourceWithConfigure.
func (d *StatusDataSource[C]) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.Data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

// Read implements datasource.DataSource.
func (d *StatusDataSource[C]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg C
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.Data == nil {
		resp.Diagnostics.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return
	}
	key, described, configured := d.Ops.StatusKey(&cfg)
	recordNamespace := configured.ValueString()
	if recordNamespace == "" {
		recordNamespace = d.DefaultRecordNamespace
	}
	raw, err := d.Ops.LoadRecord(ctx, d.Data, key, recordNamespace)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, fmt.Sprintf("Cannot Read The %s's Record", d.upperNoun())))
		return
	}
	if raw == nil {
		resp.Diagnostics.AddError(d.Title+" Not Found", fmt.Sprintf("No records of %s exist in the management cluster (namespace %q): "+
			"it was never applied, or it was destroyed. Depend on the %s (depends_on) to read it after its first apply.", described, recordNamespace, d.Noun))
		return
	}
	if !d.Ops.ObserveStatus(ctx, d.Data, &cfg, raw, recordNamespace, &resp.Diagnostics) {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

// upperNoun is Noun with a capital first letter, for a summary.
func (d *StatusDataSource[C]) upperNoun() string {
	if d.Noun == "" {
		return ""
	}
	return string(d.Noun[0]-'a'+'A') + d.Noun[1:]
}
