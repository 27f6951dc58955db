// Package provider defines the gradual provider: its configuration schema, the connection to the
// management cluster it hands to resources, and the registry of resources, data sources and
// functions.
package provider

import (
	"context"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clientconfig"
	"github.com/gradual-dev/terraform-provider-gradual/internal/functions"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/clusterkubeconfig"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/clusters"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/inplaceupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/moduleassignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/rollout"
)

// New returns a constructor for the provider at the given version.
func New(version string) func() provider.Provider {
	return NewWithEnvironment(version, clientconfig.Environment{})
}

// NewWithEnvironment is New with the environment the management connection reads (environment
// variables, the in-cluster ServiceAccount directory) replaced, for tests of in-cluster
// configuration.
func NewWithEnvironment(version string, env clientconfig.Environment) func() provider.Provider {
	// controller-runtime warns on stderr unless a logger is set; the provider reports through
	// diagnostics and tflog instead.
	ctrllog.SetLogger(logr.Discard())
	return func() provider.Provider { return &gradualProvider{version: version, env: env} }
}

type gradualProvider struct {
	version string
	env     clientconfig.Environment
}

var (
	_ provider.ProviderWithFunctions          = (*gradualProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*gradualProvider)(nil)
)

func (p *gradualProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "gradual"
	resp.Version = p.version
}

func (p *gradualProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{rollout.New, moduleassignment.New, inplaceupdate.NewResource}
}

func (p *gradualProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{clusters.New, inplaceupdate.NewPlanDataSource, rollout.NewStatusDataSource, moduleassignment.NewStatusDataSource}
}

func (p *gradualProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{clusterkubeconfig.New}
}

func (p *gradualProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{functions.NewRevision}
}
