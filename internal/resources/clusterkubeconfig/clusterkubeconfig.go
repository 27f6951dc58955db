// Package clusterkubeconfig implements the ephemeral resource `gradual_cluster_kubeconfig`: the
// endpoint and credentials of one Cluster API workload cluster, read from its `<name>-kubeconfig`
// Secret, for configuring other providers (kubernetes, helm, kubectl) per cluster without writing
// a kubeconfig to state or disk. Ephemeral values live only for one plan or apply.
package clusterkubeconfig

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
)

// New returns the ephemeral resource.
func New() ephemeral.EphemeralResource { return &kubeconfig{} }

type kubeconfig struct{ data *providerdata.Data }

var _ ephemeral.EphemeralResourceWithConfigure = (*kubeconfig)(nil)

// Model is the ephemeral resource's data.
type Model struct {
	Namespace            types.String `tfsdk:"namespace"`
	Name                 types.String `tfsdk:"name"`
	Host                 types.String `tfsdk:"host"`
	TLSServerName        types.String `tfsdk:"tls_server_name"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Token                types.String `tfsdk:"token"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Kubeconfig           types.String `tfsdk:"kubeconfig"`
}

func (k *kubeconfig) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_kubeconfig"
}

func (k *kubeconfig) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	k.data = providerdata.From(req.ProviderData, &resp.Diagnostics)
}

func (k *kubeconfig) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	computed := func(description string, sensitive bool) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Sensitive: sensitive, MarkdownDescription: description}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The endpoint and credentials of one Cluster API workload cluster, read from its `<name>-kubeconfig` Secret in " +
			"the management cluster, to configure the `kubernetes`, `helm` or `kubectl` providers per cluster. Ephemeral: the values exist " +
			"for one plan or apply and are never written to state or plan files (Terraform ≥ 1.10, OpenTofu ≥ 1.11). " +
			"The same rules as for rollouts apply: only inline credentials are handed out; a kubeconfig that asks to run an exec plugin, " +
			"read a local file or use a proxy is refused, as is a cluster whose Secret does not exist yet.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{
				Required: true, MarkdownDescription: "Namespace of the `Cluster` in the management cluster.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 63)},
			},
			"name": schema.StringAttribute{
				Required: true, MarkdownDescription: "Name of the `Cluster`.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 253)},
			},
			"host":                   computed("API server URL (`https://…`).", false),
			"tls_server_name":        computed("Server name to verify the API server's certificate against, when the kubeconfig sets one; else empty.", false),
			"cluster_ca_certificate": computed("PEM CA bundle of the API server; empty when the kubeconfig sets none.", false),
			"token":                  computed("Bearer token, when the kubeconfig uses one; else empty.", true),
			"client_certificate":     computed("PEM client certificate, when the kubeconfig uses one; else empty.", false),
			"client_key":             computed("PEM client key, when the kubeconfig uses one; else empty.", true),
			"kubeconfig":             computed("The Secret's kubeconfig, unchanged (for tools that take a whole kubeconfig).", true),
		},
	}
}

func (k *kubeconfig) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var model Model
	if !k.data.Read(ctx, req.Config, &model, &resp.Diagnostics) {
		return
	}
	creds, err := k.data.Management.WorkloadCredentials(ctx, model.Namespace.ValueString(), model.Name.ValueString())
	if err != nil {
		resp.Diagnostics.Append(diagnostics.AttributeFromError(path.Root("name"), err, "Cluster Kubeconfig Unavailable"))
		return
	}
	model.Host = types.StringValue(creds.Host)
	model.TLSServerName = types.StringValue(creds.TLSServerName)
	model.ClusterCACertificate = types.StringValue(string(creds.CertificateAuthority))
	model.Token = types.StringValue(creds.Token)
	model.ClientCertificate = types.StringValue(string(creds.ClientCertificate))
	model.ClientKey = types.StringValue(string(creds.ClientKey))
	model.Kubeconfig = types.StringValue(string(creds.Kubeconfig))
	resp.Diagnostics.Append(resp.Result.Set(ctx, &model)...)
}
