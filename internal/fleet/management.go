// Package fleet finds the CAPI Clusters a rollout targets in the management cluster, decides which
// are eligible (and why the others are skipped), and owns the clients of the workload clusters,
// built from their kubeconfig Secrets (Clients). Every resource and data source uses it, so the
// rules for readiness, skipping and client freshness live in one place.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// ClusterAPIGroup is the API group of CAPI's Cluster objects.
const ClusterAPIGroup = "cluster.x-k8s.io"

// Management is the connection to the management cluster, where the CAPI Cluster objects and
// their kubeconfig Secrets live.
type Management struct {
	Client     client.Client
	RESTConfig *rest.Config
	// Source says where the connection settings came from, for messages; it holds no secrets.
	Source string
	// Clock judges maintenance windows; nil is the wall clock.
	Clock clock.Reader

	mu         sync.Mutex
	apiVersion string // served CAPI version, found on first use
	workloads  workloadConfigs
	mappers    restMappers
}

// NewManagement builds a client for the management cluster. It does not contact the server.
func NewManagement(cfg *rest.Config, source string) (*Management, error) {
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, usererr.Wrap(err, "Management Cluster Client Failed",
			"Could not build a client for the management cluster from "+source+".")
	}
	return &Management{Client: c, RESTConfig: cfg, Source: source}, nil
}

// Scheme returns the types the provider reads and writes in the management cluster.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, clusterv1.AddToScheme, clusterv1beta1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err) // only on programming errors: the schemes are static
		}
	}
	return scheme
}

// ClusterAPIVersion returns the newest served version of the CAPI core API that the provider
// understands: v1beta2, or v1beta1 on management clusters running CAPI before v1.11. It also
// serves as the connectivity check, so its errors say how the server was reached.
func (m *Management) ClusterAPIVersion(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.apiVersion != "" {
		return m.apiVersion, nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(m.RESTConfig)
	if err != nil {
		return "", m.unreachable(err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return "", m.unreachable(err)
	}
	served := map[string]bool{}
	for _, g := range groups.Groups {
		if g.Name != ClusterAPIGroup {
			continue
		}
		for _, v := range g.Versions {
			served[v.Version] = true
		}
	}
	switch {
	case served[clusterv1.GroupVersion.Version]:
		m.apiVersion = clusterv1.GroupVersion.Version
	case served[clusterv1beta1.GroupVersion.Version]:
		m.apiVersion = clusterv1beta1.GroupVersion.Version
	default:
		return "", usererr.New("Cluster API Not Installed",
			fmt.Sprintf("The cluster reached through %s serves no %s/v1beta2 or v1beta1 API. "+
				"Point the provider at the management cluster where Cluster API is installed (clusterctl init).", m.Source, ClusterAPIGroup))
	}
	return m.apiVersion, nil
}

func (m *Management) unreachable(err error) error {
	detail := fmt.Sprintf("Could not reach the management cluster at %s (settings from %s)", m.RESTConfig.Host, m.Source)
	var urlErr *url.Error
	var netErr net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return usererr.Wrap(err, "Management Cluster Rejected Credentials",
			detail+": the server rejected the credentials. Check that the token or client certificate is current.")
	case apierrors.IsForbidden(err):
		return usererr.Wrap(err, "Management Cluster Access Denied",
			detail+": the credentials may not list API groups. Grant discovery access (system:discovery).")
	case errors.As(err, &urlErr), errors.As(err, &netErr):
		return usererr.Wrap(err, "Management Cluster Unreachable",
			detail+". Check that the server is running and reachable from here, and that kubeconfig_path/context (or host) point at it.")
	}
	return usererr.Wrap(err, "Management Cluster Unreachable", detail+".")
}

// now is the management's time, by which maintenance windows are judged.
func (m *Management) now() time.Time {
	if m.Clock == nil {
		return clock.System{}.Now()
	}
	return m.Clock.Now()
}
