package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// restMappers holds one REST mapper per API server. What a server serves (its discovery) does not
// depend on which of the Clusters that reach it asks, so Clusters behind one server (virtual
// clusters, a shared gateway, a scale bed) share one mapper: discovery is then fetched once per
// server instead of once per Cluster, and held in memory once.
type restMappers struct {
	mu      sync.Mutex
	mappers map[string]meta.RESTMapper
}

// serverIdentity names an API server: its URL, the TLS server name and the CA that vouches for
// it. Two configs with the same identity reach the same server.
func serverIdentity(cfg *rest.Config) string {
	ca := sha256.Sum256(cfg.CAData)
	return cfg.Host + "|" + cfg.ServerName + "|" + hex.EncodeToString(ca[:]) + "|" + fmt.Sprint(cfg.Insecure)
}

// RESTMapper returns the REST mapper shared by every workload cluster whose config reaches the
// same API server as cfg (same host, TLS server name and CA). It discovers lazily, with the
// credentials of the first cluster that asked; discovery is readable by every authenticated
// user of a server.
func (m *Management) RESTMapper(cfg *rest.Config) (meta.RESTMapper, error) {
	id := serverIdentity(cfg)
	m.mappers.mu.Lock()
	defer m.mappers.mu.Unlock()
	if mapper, ok := m.mappers.mappers[id]; ok {
		return mapper, nil
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("REST mapper: HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("REST mapper: %w", err)
	}
	if m.mappers.mappers == nil {
		m.mappers.mappers = map[string]meta.RESTMapper{}
	}
	m.mappers.mappers[id] = mapper
	return mapper, nil
}
