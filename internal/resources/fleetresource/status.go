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

// StatusOps is what the model of the status data source of a resource that runs through the
// engine (`gradual_rollout_status`, `gradual_module_assignment_status`) supplies to
// StatusDataSource: its schema, and how it reads itself from the fleet the resource's record
// picks. C is the model, which embeds StatusModel; StatusOps is its pointer.
type StatusOps[C any] interface {
	*C
	StatusKey
	// StatusSchema is the data source's schema without the attributes that name the resource
	// (`namespace`, `name`, `record_namespace`) and without `summary`, which StatusDataSource
	// adds; its description says what the data source shows, StatusDataSource adds why and when
	// it reads.
	StatusSchema() schema.Schema
	// ObserveStatus reads the fleet the record raw of key picks as it is now and fills the model
	// from it. It reports whether the model is to be saved (an error found after the read still
	// saves it).
	ObserveStatus(ctx context.Context, data *providerdata.Data, key records.Key, raw []byte, recordNamespace string, diags *diag.Diagnostics) bool
}

// StatusKeyModel is the part of a status data source's model that names the resource, embedded
// in the model (the framework promotes its fields).
type StatusKeyModel struct {
	Namespace       types.String `tfsdk:"namespace"`
	Name            types.String `tfsdk:"name"`
	RecordNamespace types.String `tfsdk:"record_namespace"`
}

// StatusModel is what every status data source's model holds, embedded in it: the resource's
// key, the count of clusters per state (`summary`) and every cluster (`clusters`), each a CL.
type StatusModel[CL any] struct {
	StatusKeyModel
	Summary  map[string]int64 `tfsdk:"summary"`
	Clusters []CL             `tfsdk:"clusters"`
}

// StatusKey gives StatusDataSource the StatusKeyModel a data source's model embeds.
type StatusKey interface{ statusKey() StatusKeyModel }

func (k StatusKeyModel) statusKey() StatusKeyModel { return k }

// StatusDataSource is a status data source: its Schema with the attributes that name the
// resource, Configure, and a Read of the provider check, the record lookup with its not-found
// diagnostic, then the model's ObserveStatus. Both status data sources are one, so that they
// read and refuse alike; each supplies only its model (C, and P its pointer).
type StatusDataSource[C any, P StatusOps[C]] struct {
	Data *providerdata.Data
	// Kind names the resource whose status it reads.
	Kind Kind
}

// NewStatus is the status data source of the resource kind names, with model C.
func NewStatus[C any, P StatusOps[C]](kind Kind) datasource.DataSourceWithConfigure {
	return &StatusDataSource[C, P]{Kind: kind}
}

// Metadata implements datasource.DataSource.
func (d *StatusDataSource[C, P]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + d.Kind.Type + "_status"
}

// Schema implements datasource.DataSource: Ops.StatusSchema with the attributes that name the
// resource and its `summary`.
func (d *StatusDataSource[C, P]) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	var m C
	resp.Schema = P(&m).StatusSchema()
	noun := d.Kind.Noun
	resp.Schema.MarkdownDescription += " The " + noun + "'s plan shows only counts (`summary`) and the clusters needing attention, " +
		"so that it stays readable at any fleet size; this is the detail, for outputs, `check` blocks and a closer look. It reads " +
		"the clusters the " + noun + "'s last apply picked (from the management cluster's record) as they are now; depend on the " +
		noun + " (`depends_on`) to read it after the " + noun + "'s apply."
	resp.Schema.Attributes = d.keyAttributes(resp.Schema.Attributes)
}

// keyAttributes are a status data source's attributes: those that name the resource
// (`namespace`, `name`, `record_namespace`), its `summary` (StatusModel), and more.
func (d *StatusDataSource[C, P]) keyAttributes(more map[string]schema.Attribute) map[string]schema.Attribute {
	attrs := map[string]schema.Attribute{
		"summary": schema.MapAttribute{
			Computed: true, ElementType: types.Int64Type,
			MarkdownDescription: "How many clusters are in each state, as the " + d.Kind.Noun + "'s `summary`.",
		},
		"namespace": schema.StringAttribute{Required: true, MarkdownDescription: "`namespace` of the " + d.Kind.Noun + " (of its Cluster objects)."},
		"name":      schema.StringAttribute{Required: true, MarkdownDescription: "`name` of the " + d.Kind.Noun + "."},
		"record_namespace": schema.StringAttribute{
			Optional: true, MarkdownDescription: "`record_namespace` of the " + d.Kind.Noun + ". Default `" + d.Kind.DefaultRecordNamespace + "`.",
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
func (d *StatusDataSource[C, P]) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.Data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

// Read implements datasource.DataSource.
func (d *StatusDataSource[C, P]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg C
	if !d.Data.Read(ctx, req.Config, &cfg, &resp.Diagnostics) {
		return
	}
	named := P(&cfg).statusKey()
	key := records.Key{Kind: d.Kind.Records, Namespace: named.Namespace.ValueString(), Name: named.Name.ValueString()}
	recordNamespace := named.RecordNamespace.ValueString()
	if recordNamespace == "" {
		recordNamespace = d.Kind.DefaultRecordNamespace
	}
	raw, err := d.Data.Delivery.LoadConfig(ctx, key, recordNamespace)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, fmt.Sprintf("Cannot Read The %s's Record", d.upperNoun())))
		return
	}
	if raw == nil {
		resp.Diagnostics.AddError(d.Kind.Title+" Not Found", fmt.Sprintf("No records of %s exist in the management cluster (namespace %q): "+
			"it was never applied, or it was destroyed. Depend on the %s (depends_on) to read it after its first apply.", key.Describe(), recordNamespace, d.Kind.Noun))
		return
	}
	if !P(&cfg).ObserveStatus(ctx, d.Data, key, raw, recordNamespace, &resp.Diagnostics) {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

// upperNoun is Noun with a capital first letter, for a summary.
func (d *StatusDataSource[C, P]) upperNoun() string {
	if d.Kind.Noun == "" {
		return ""
	}
	return string(d.Kind.Noun[0]-'a'+'A') + d.Kind.Noun[1:]
}
