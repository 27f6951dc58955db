package delivery

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// DefaultConcurrency bounds how many clusters are read or changed at once outside the waves
// (refresh, plan, destroy); the waves themselves are bounded by update_limit.
const DefaultConcurrency = 20

// readinessPoll is how often a wave reads its objects' status while it waits for them to be
// ready. A wave ends on a poll, so this bounds what waiting costs over kubectl's watch (make
// bench: 2 s polls made the provider ~1.3x kubectl, 0.5 s ~1.0x); a read per object every 0.5 s
// is a light load for an API server.
const readinessPoll = 500 * time.Millisecond

// Service carries revisions to the clusters of one management cluster.
type Service struct {
	mgmt        *fleet.Management
	concurrency int
	clock       engine.Clock

	mu    sync.Mutex
	conns map[string]*conn // per workload cluster, keyed namespace/name
}

// conn is one workload cluster's clients, reused for the provider process's lifetime.
type conn struct {
	cfg     *rest.Config
	client  client.Client
	applier *apply.Applier
	force   bool
	checked time.Time // when the kubeconfig Secret was last read for it
}

// connRecheck is how long a cluster's clients are used without reading its kubeconfig Secret
// again. A wave calls on each cluster several times (record, apply, verify, record); reading the
// Secret each time would cost the management cluster four requests per cluster and wave.
const connRecheck = 30 * time.Second

// New returns a service for the management cluster mgmt.
func New(mgmt *fleet.Management, concurrency int) *Service {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	return &Service{mgmt: mgmt, concurrency: concurrency, clock: engine.SystemClock{}, conns: map[string]*conn{}}
}

// cluster returns the clients of one workload cluster, building them on first use and again when
// its kubeconfig changed (checked at most every connRecheck).
func (s *Service) cluster(ctx context.Context, namespace, name string, force bool) (*conn, error) {
	id := namespace + "/" + name
	s.mu.Lock()
	if c, ok := s.conns[id]; ok && c.force == force && time.Since(c.checked) < connRecheck {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	cfg, err := s.mgmt.WorkloadConfig(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[id]; ok && c.cfg.Host == cfg.Host && string(c.cfg.CertData) == string(cfg.CertData) &&
		c.cfg.BearerToken == cfg.BearerToken && c.force == force {
		c.checked = time.Now()
		return c, nil
	}
	applier, err := apply.New(cfg, apply.Options{FieldManager: apply.DefaultFieldManager, ForceConflicts: force, PollInterval: readinessPoll})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	c := &conn{cfg: cfg, client: applier.Client(), applier: applier, force: force, checked: time.Now()}
	s.conns[id] = c
	return c, nil
}

// managementStore is the management cluster's record store for key's records namespace.
func (s *Service) managementStore(recordNamespace string) *records.ManagementStore {
	return records.NewManagementStore(s.mgmt.Client, recordNamespace)
}

// forEach runs fn for every name with at most s.concurrency at once, and returns the errors by
// name.
func (s *Service) forEach(ctx context.Context, names []string, fn func(ctx context.Context, name string) error) map[string]error {
	var (
		mu   sync.Mutex
		errs = map[string]error{}
		wg   sync.WaitGroup
		sem  = make(chan struct{}, s.concurrency)
	)
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, name); err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// MostCommon returns the most frequent key of counts, ties broken by the smallest key, "" for none.
func MostCommon(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best, bestN := "", 0
	for _, k := range keys {
		if counts[k] > bestN {
			best, bestN = k, counts[k]
		}
	}
	return best
}
