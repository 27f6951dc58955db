package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clientconfig"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
)

// configModel is the provider block.
type configModel struct {
	KubeconfigPath       types.String  `tfsdk:"kubeconfig_path"`
	Context              types.String  `tfsdk:"context"`
	KubeconfigRaw        types.String  `tfsdk:"kubeconfig_raw"`
	Host                 types.String  `tfsdk:"host"`
	Token                types.String  `tfsdk:"token"`
	ClientCertificate    types.String  `tfsdk:"client_certificate"`
	ClientKey            types.String  `tfsdk:"client_key"`
	ClusterCACertificate types.String  `tfsdk:"cluster_ca_certificate"`
	Insecure             types.Bool    `tfsdk:"insecure"`
	QPS                  types.Float64 `tfsdk:"qps"`
	Burst                types.Int64   `tfsdk:"burst"`
	MaxParallelClusters  types.Int64   `tfsdk:"max_parallel_clusters"`
}

func (p *gradualProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	notWith := func(names ...string) validator.String {
		exprs := make([]path.Expression, len(names))
		for i, n := range names {
			exprs[i] = path.MatchRoot(n)
		}
		return stringvalidator.ConflictsWith(exprs...)
	}
	needs := func(name string) validator.String { return stringvalidator.AlsoRequires(path.MatchRoot(name)) }
	resp.Schema = schema.Schema{
		MarkdownDescription: "Rolls changes out across a fleet of Cluster API–managed Kubernetes clusters gradually and verified. " +
			"The provider connects to the **management cluster**, where the CAPI `Cluster` objects and their `<name>-kubeconfig` " +
			"Secrets live; it reaches each workload cluster through that Secret. Set one of: `kubeconfig_path` (with optional " +
			"`context`), `kubeconfig_raw`, or `host` with `token` or `client_certificate`/`client_key`. With none, the " +
			"`KUBECONFIG` environment variable and then `~/.kube/config` are used, like kubectl.",
		Attributes: map[string]schema.Attribute{
			"kubeconfig_path": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Path to the management cluster's kubeconfig; `~` is expanded.",
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1), notWith("kubeconfig_raw", "host")},
			},
			"context": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Kubeconfig context to use; defaults to the kubeconfig's current context.",
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1), notWith("host")},
			},
			"kubeconfig_raw": schema.StringAttribute{
				Optional: true, Sensitive: true,
				MarkdownDescription: "The management cluster's kubeconfig as YAML text. Never stored in state.",
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1), notWith("kubeconfig_path", "host")},
			},
			"host": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "API server URL of the management cluster (`https://HOST:PORT`). Needs `token` or `client_certificate` and `client_key`.",
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"token": schema.StringAttribute{
				Optional: true, Sensitive: true,
				MarkdownDescription: "Bearer token for `host`.",
				Validators:          []validator.String{needs("host"), notWith("client_certificate")},
			},
			"client_certificate": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM client certificate for `host`; needs `client_key`.",
				Validators:          []validator.String{needs("host"), needs("client_key")},
			},
			"client_key": schema.StringAttribute{
				Optional: true, Sensitive: true,
				MarkdownDescription: "PEM client key for `client_certificate`.",
				Validators:          []validator.String{needs("client_certificate")},
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM CA bundle that signed the API server's certificate, for `host`.",
				Validators:          []validator.String{needs("host")},
			},
			"insecure": schema.BoolAttribute{
				Optional:            true,
				MarkdownDescription: "Skip verifying the API server's certificate (for `host`). For test beds only.",
			},
			"qps": schema.Float64Attribute{
				Optional:            true,
				MarkdownDescription: fmt.Sprintf("Client-side request rate limit towards each cluster, per second (default %d).", clientconfig.DefaultQPS),
				Validators:          []validator.Float64{float64validator.Between(1, 10000)},
			},
			"burst": schema.Int64Attribute{
				Optional:            true,
				MarkdownDescription: fmt.Sprintf("Client-side request burst towards each cluster (default %d).", clientconfig.DefaultBurst),
				Validators:          []validator.Int64{int64validator.Between(1, 100000)},
			},
			"max_parallel_clusters": schema.Int64Attribute{
				Optional: true,
				MarkdownDescription: fmt.Sprintf("How many workload clusters are read or cleaned up at once during refresh, plan and destroy (default %d). "+
					"Changes during apply are bounded by each resource's `update_limit`.", delivery.DefaultConcurrency),
				Validators: []validator.Int64{int64validator.Between(1, 1000)},
			},
		},
	}
}

func (p *gradualProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg configModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for name, v := range map[string]interface{ IsUnknown() bool }{
		"kubeconfig_path": cfg.KubeconfigPath, "context": cfg.Context, "kubeconfig_raw": cfg.KubeconfigRaw,
		"host": cfg.Host, "token": cfg.Token, "client_certificate": cfg.ClientCertificate, "client_key": cfg.ClientKey,
		"cluster_ca_certificate": cfg.ClusterCACertificate, "insecure": cfg.Insecure, "qps": cfg.QPS, "burst": cfg.Burst,
		"max_parallel_clusters": cfg.MaxParallelClusters,
	} {
		if v.IsUnknown() {
			// Leaving ResourceData unset makes resources report diagnostics.UnconfiguredProvider.
			resp.Diagnostics.AddAttributeWarning(path.Root(name), "Provider Configuration Not Yet Known",
				"The value of "+name+" is known only after apply, so the provider cannot connect to the management cluster during this plan.")
			return
		}
	}
	settings := clientconfig.Settings{
		KubeconfigPath:       cfg.KubeconfigPath.ValueString(),
		Context:              cfg.Context.ValueString(),
		KubeconfigRaw:        cfg.KubeconfigRaw.ValueString(),
		Host:                 cfg.Host.ValueString(),
		Token:                cfg.Token.ValueString(),
		ClientCertificate:    cfg.ClientCertificate.ValueString(),
		ClientKey:            cfg.ClientKey.ValueString(),
		ClusterCACertificate: cfg.ClusterCACertificate.ValueString(),
		Insecure:             cfg.Insecure.ValueBool(),
		QPS:                  float32(cfg.QPS.ValueFloat64()),
		Burst:                int(cfg.Burst.ValueInt64()),
		UserAgent:            "terraform-provider-gradual/" + p.version,
	}
	conn, err := clientconfig.Build(settings)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Invalid Provider Configuration"))
		return
	}
	mgmt, err := fleet.NewManagement(conn.REST, conn.Source)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Invalid Provider Configuration"))
		return
	}
	data := &providerdata.Data{Management: mgmt, Delivery: delivery.New(mgmt, int(cfg.MaxParallelClusters.ValueInt64()))}
	resp.DataSourceData = data
	resp.ResourceData = data
}
