package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clientconfig"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
)

// configModel is the provider block.
type configModel struct {
	ConfigPath            types.String  `tfsdk:"config_path"`
	KubeconfigPath        types.String  `tfsdk:"kubeconfig_path"`
	ConfigPaths           types.List    `tfsdk:"config_paths"`
	ConfigContext         types.String  `tfsdk:"config_context"`
	Context               types.String  `tfsdk:"context"`
	ConfigContextAuthInfo types.String  `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String  `tfsdk:"config_context_cluster"`
	KubeconfigRaw         types.String  `tfsdk:"kubeconfig_raw"`
	Host                  types.String  `tfsdk:"host"`
	Token                 types.String  `tfsdk:"token"`
	ClientCertificate     types.String  `tfsdk:"client_certificate"`
	ClientKey             types.String  `tfsdk:"client_key"`
	ClusterCACertificate  types.String  `tfsdk:"cluster_ca_certificate"`
	Insecure              types.Bool    `tfsdk:"insecure"`
	TLSServerName         types.String  `tfsdk:"tls_server_name"`
	ProxyURL              types.String  `tfsdk:"proxy_url"`
	Exec                  types.Object  `tfsdk:"exec"`
	RequestTimeout        types.String  `tfsdk:"request_timeout"`
	QPS                   types.Float64 `tfsdk:"qps"`
	Burst                 types.Int64   `tfsdk:"burst"`
	MaxParallelClusters   types.Int64   `tfsdk:"max_parallel_clusters"`
	LeaseDuration         types.String  `tfsdk:"lease_duration"`
	MaintenanceWindow     types.Object  `tfsdk:"maintenance_window"`
}

// execModel is the exec block.
type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

// seconds writes d as a duration attribute's value, e.g. "60s".
func seconds(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

// env names an attribute's environment variable in its description.
func env(attr string) string {
	return " Environment variable: `" + clientconfig.EnvVar(attr) + "`."
}

func (p *gradualProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	roots := func(names ...string) []path.Expression {
		exprs := make([]path.Expression, len(names))
		for i, n := range names {
			exprs[i] = path.MatchRoot(n)
		}
		return exprs
	}
	notWith := func(names ...string) validator.String { return stringvalidator.ConflictsWith(roots(names...)...) }
	needs := func(name string) validator.String { return stringvalidator.AlsoRequires(path.MatchRoot(name)) }
	// nonEmpty is an optional string attribute that, when set, may not be empty: most of the
	// connection settings.
	nonEmpty := func(description string, also ...validator.String) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: description,
			Validators: append([]validator.String{stringvalidator.LengthAtLeast(1)}, also...)}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Rolls changes out across a fleet of Cluster API–managed Kubernetes clusters gradually and verified. " +
			"The provider connects to the **management cluster**, where the CAPI `Cluster` objects and their `<name>-kubeconfig` " +
			"Secrets live; it reaches each workload cluster through that Secret.\n\n" +
			"The connection is configured like the hashicorp/kubernetes provider's: a kubeconfig (`config_path`, `config_paths` or " +
			"`kubeconfig_raw`, with `config_context`), and/or `host` with `token`, `client_certificate`/`client_key` or an `exec` block; " +
			"set together, the explicit settings override the kubeconfig's context. Every connection attribute falls back to its " +
			"`KUBE_*` environment variable. With nothing configured, a pod's ServiceAccount is used when `KUBERNETES_SERVICE_HOST` and " +
			"`KUBERNETES_SERVICE_PORT` are set (Atlantis, Terraform Cloud agents); otherwise configuration fails with the list of ways to " +
			"configure. `~/.kube/config` and `KUBECONFIG` are never read implicitly.",
		Attributes: map[string]schema.Attribute{
			"config_path": nonEmpty("Path to the management cluster's kubeconfig; `~` is expanded."+env("config_path"),
				notWith("kubeconfig_path", "config_paths", "kubeconfig_raw")),
			"kubeconfig_path": nonEmpty("The same as `config_path` (the name of earlier versions).", notWith("config_path", "config_paths", "kubeconfig_raw")),
			"config_paths": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Kubeconfig files merged like kubectl merges `KUBECONFIG` (the first file that sets a value wins); every file must exist." +
					" Environment variable: `KUBE_CONFIG_PATHS` (a path list, `:`-separated on Unix).",
				Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ConflictsWith(roots("config_path", "kubeconfig_path", "kubeconfig_raw")...)},
			},
			"config_context": nonEmpty("Kubeconfig context to use; defaults to the kubeconfig's current context."+env("config_context"),
				notWith("context")),
			"context":                  nonEmpty("The same as `config_context` (the name of earlier versions).", notWith("config_context")),
			"config_context_auth_info": nonEmpty("Kubeconfig user to use instead of the context's." + env("config_context_auth_info")),
			"config_context_cluster":   nonEmpty("Kubeconfig cluster to use instead of the context's." + env("config_context_cluster")),
			"kubeconfig_raw": schema.StringAttribute{
				Optional: true, Sensitive: true,
				MarkdownDescription: "The management cluster's kubeconfig as YAML text. Never stored in state.",
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1), notWith("config_path", "kubeconfig_path", "config_paths")},
			},
			"host": nonEmpty("API server URL of the management cluster (`https://HOST:PORT`). Without a kubeconfig, needs `token`, " +
				"`client_certificate` and `client_key`, or an `exec` block; with one, overrides its server." + env("host")),
			"token": schema.StringAttribute{
				Optional: true, Sensitive: true,
				MarkdownDescription: "Bearer token." + env("token"),
				Validators:          []validator.String{notWith("client_certificate")},
			},
			"client_certificate": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM client certificate; needs `client_key`." + env("client_certificate"),
				Validators:          []validator.String{needs("client_key")},
			},
			"client_key": schema.StringAttribute{
				Optional: true, Sensitive: true,
				MarkdownDescription: "PEM client key for `client_certificate`." + env("client_key"),
				Validators:          []validator.String{needs("client_certificate")},
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM CA bundle that signed the API server's certificate." + env("cluster_ca_certificate"),
			},
			"insecure": schema.BoolAttribute{
				Optional:            true,
				MarkdownDescription: "Skip verifying the API server's certificate. For test beds only." + env("insecure"),
			},
			"tls_server_name": nonEmpty("Server name to verify the API server's certificate against, when it differs from `host`'s." + env("tls_server_name")),
			"proxy_url":       nonEmpty("Proxy for requests to the management cluster (`http://`, `https://` or `socks5://`)." + env("proxy_url")),
			"request_timeout": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Time limit of one request to the management or a workload cluster, and of the first run of the `exec` " +
					"plugin (default `" + seconds(settings.DefaultRequestTimeout) + "`). It governs every resource alike: a rollout's and a " +
					"module assignment's reads and writes of the workload clusters and their records, and an in-place update's reads and " +
					"writes of the management cluster's Cluster API objects. Long waits such as verification are loops of short requests " +
					"and are not limited by it.",
				Validators: []validator.String{fleetresource.Duration(time.Second, 10*time.Minute)},
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
			"lease_duration": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "How long the Lease of a running apply outlives an apply that stopped renewing it, such as a killed CI job: " +
					"the next apply of the same resource waits that long before it takes over (default `" + seconds(settings.DefaultLeaseDuration) + "`). " +
					"It governs the Lease of every resource that changes the fleet: a `gradual_rollout`'s and a `gradual_module_assignment`'s " +
					"(one per resource), and a `gradual_inplace_update`'s (one per owner of the machines it updates, single-owner and fleet form). " +
					"A live apply renews its Lease every third of it, so keep it well above the management cluster's worst response time.",
				Validators: []validator.String{fleetresource.Duration(15*time.Second, time.Hour)},
			},
			"max_parallel_clusters": schema.Int64Attribute{
				Optional: true,
				MarkdownDescription: fmt.Sprintf("How many workload clusters are read, previewed or cleaned up at once (default %d): "+
					"by a `gradual_rollout` and a `gradual_module_assignment` during refresh, plan and destroy; by the fleet form of "+
					"`gradual_inplace_update` (and `data.gradual_inplace_update_plan`) while it reads the clusters at refresh and previews "+
					"them with the update extensions at plan and when apply starts. Changes during apply are bounded by each resource's `update_limit`.", settings.DefaultParallelism),
				Validators: []validator.Int64{int64validator.Between(1, 1000)},
			},
			"maintenance_window": fleetresource.ProviderMaintenanceWindowAttribute(),
		},
		Blocks: map[string]schema.Block{
			"exec": schema.SingleNestedBlock{
				MarkdownDescription: "An exec credential plugin that prints the credential for the management cluster, as in a kubeconfig's " +
					"`user.exec` (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`). Runs without a terminal. Its first run, while the " +
					"provider is configured, is stopped after `request_timeout` and reported naming the command; later runs, when the credential " +
					"expires during a long apply, are client-go's and have no time limit of their own.",
				Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "The ExecCredential version the plugin speaks: `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`. Required in the block.",
						Validators: []validator.String{stringvalidator.OneOf("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"),
							stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("command"))},
					},
					"command": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "The plugin to run, a name looked up on `PATH` or a path. Required in the block.",
						Validators: []validator.String{stringvalidator.LengthAtLeast(1),
							stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("api_version"))},
					},
					"args": schema.ListAttribute{
						Optional: true, ElementType: types.StringType,
						MarkdownDescription: "Arguments to the plugin.",
					},
					"env": schema.MapAttribute{
						Optional: true, Sensitive: true, ElementType: types.StringType,
						MarkdownDescription: "Environment variables added to the provider's for the plugin. Sensitive: never shown in plans or errors.",
					},
				},
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
	if !req.Config.Raw.IsFullyKnown() {
		// Leaving ResourceData unset makes resources report diagnostics.UnconfiguredProvider.
		resp.Diagnostics.AddWarning("Provider Configuration Not Yet Known",
			"Some of the provider's settings are known only after apply (they depend on resources not yet created), "+
				"so the provider cannot connect to the management cluster during this plan.")
		return
	}
	set, diags := settingsOf(ctx, cfg)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	connection := clientconfig.Settings{
		KubeconfigPath:       cfg.ConfigPath.ValueString(),
		Context:              cfg.ConfigContext.ValueString(),
		ContextAuthInfo:      cfg.ConfigContextAuthInfo.ValueString(),
		ContextCluster:       cfg.ConfigContextCluster.ValueString(),
		KubeconfigRaw:        cfg.KubeconfigRaw.ValueString(),
		Host:                 cfg.Host.ValueString(),
		Token:                cfg.Token.ValueString(),
		ClientCertificate:    cfg.ClientCertificate.ValueString(),
		ClientKey:            cfg.ClientKey.ValueString(),
		ClusterCACertificate: cfg.ClusterCACertificate.ValueString(),
		Insecure:             cfg.Insecure.ValueBoolPointer(),
		TLSServerName:        cfg.TLSServerName.ValueString(),
		ProxyURL:             cfg.ProxyURL.ValueString(),
		QPS:                  float32(cfg.QPS.ValueFloat64()),
		Burst:                int(cfg.Burst.ValueInt64()),
		UserAgent:            "terraform-provider-gradual/" + p.version,
		RequestTimeout:       set.RequestTimeout,
		Env:                  p.env,
	}
	if connection.KubeconfigPath == "" {
		connection.KubeconfigPath = cfg.KubeconfigPath.ValueString()
	}
	if connection.Context == "" {
		connection.Context = cfg.Context.ValueString()
	}
	resp.Diagnostics.Append(cfg.ConfigPaths.ElementsAs(ctx, &connection.KubeconfigPaths, false)...)
	if !cfg.Exec.IsNull() {
		var e execModel
		resp.Diagnostics.Append(cfg.Exec.As(ctx, &e, basetypes.ObjectAsOptions{})...)
		connection.Exec = &clientconfig.Exec{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString()}
		resp.Diagnostics.Append(e.Args.ElementsAs(ctx, &connection.Exec.Args, false)...)
		resp.Diagnostics.Append(e.Env.ElementsAs(ctx, &connection.Exec.Env, false)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	conn, err := clientconfig.Build(ctx, connection)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Invalid Provider Configuration"))
		return
	}
	mgmt, err := fleet.NewManagement(conn.REST, conn.Source)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Invalid Provider Configuration"))
		return
	}
	data := providerdata.New(mgmt, fleet.NewClients(mgmt, nil), set)
	resp.DataSourceData = data
	resp.ResourceData = data
	resp.EphemeralResourceData = data
}

// settingsOf reads the provider-wide settings of cfg: one value, which every service is built
// with (providerdata.New) and whose request_timeout bounds the connection too. Unset settings
// stay zero, for their defaults.
func settingsOf(ctx context.Context, cfg configModel) (settings.Settings, diag.Diagnostics) {
	set := settings.Settings{Parallelism: int(cfg.MaxParallelClusters.ValueInt64())}
	var diags diag.Diagnostics
	if s := cfg.RequestTimeout.ValueString(); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			diags.AddAttributeError(path.Root("request_timeout"), "Invalid Duration", "request_timeout must be a duration such as \"30s\" or \"2m\".")
			return set, diags
		}
		set.RequestTimeout = d
	}
	if s := cfg.LeaseDuration.ValueString(); s != "" {
		// Validated as a duration at plan time; an unparsable value keeps the default.
		set.LeaseDuration, _ = time.ParseDuration(s)
	}
	var d diag.Diagnostics
	set.Window, d = fleetresource.WindowFrom(ctx, cfg.MaintenanceWindow)
	diags.Append(d...)
	return set, diags
}
