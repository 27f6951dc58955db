package delivery

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// leaseDuration is how long the Lease of an apply outlives a holder that stopped renewing it.
	leaseDuration time.Duration
	clock         engine.Clock

	// The seams between the rollout logic and the clusters, replaced by unit tests with fakes
	// that inject faults: dial builds the clients of one workload cluster (reading its
	// kubeconfig Secret), goneReason says whether a cluster left the fleet
	// (fleet.Management.GoneReason), retryWait is how long the first retry of an
	// infrastructure failure waits (it doubles up to maxRetryWait).
	dial       func(ctx context.Context, namespace, name string, force bool) (*conn, error)
	goneReason func(ctx context.Context, namespace, name string) (string, error)
	retryWait  time.Duration

	mu    sync.Mutex
	conns map[string]*conn // per workload cluster, keyed namespace/name
}

// conn is one workload cluster's clients, reused for the provider process's lifetime.
type conn struct {
	cfg     *rest.Config
	client  client.Client
	applier objectApplier
	force   bool
	checked time.Time // when the kubeconfig Secret was last read for it
}

// objectApplier is what delivery does with a workload cluster's objects: *apply.Applier, or a
// fake in unit tests.
type objectApplier interface {
	Check(ctx context.Context, objs []*unstructured.Unstructured) error
	Apply(ctx context.Context, objs []*unstructured.Unstructured) (*apply.Result, error)
	Prune(ctx context.Context, previous apply.Inventory, objs []*unstructured.Unstructured) (*apply.DeleteResult, error)
	Delete(ctx context.Context, inv apply.Inventory) (*apply.DeleteResult, error)
	WaitDeleted(ctx context.Context, refs []apply.ObjectRef) error
	Wait(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error
	Drift(ctx context.Context, objs []*unstructured.Unstructured) ([]apply.Drift, error)
	Existing(ctx context.Context, objs []*unstructured.Unstructured) ([]apply.Existing, error)
	Release(ctx context.Context, refs []apply.ObjectRef) error
	Revert(ctx context.Context, saved []*unstructured.Unstructured) error
}

// ignoring returns c with an applier that leaves the fields ig names alone; c itself, shared
// by every rollout that reaches the cluster, stays as it is. Fakes are returned unchanged.
func (c *conn) ignoring(ig apply.Ignore) *conn {
	a, ok := c.applier.(*apply.Applier)
	if !ok || len(ig) == 0 {
		return c
	}
	out := *c
	out.applier = a.WithIgnore(ig)
	return &out
}

// connRecheck is how long a cluster's clients are used without reading its kubeconfig Secret
// again. A wave calls on each cluster several times (record, apply, verify, record); reading the
// Secret each time would cost the management cluster four requests per cluster and wave.
const connRecheck = 30 * time.Second

// Options are the provider's settings for the service. Zero values take the defaults.
type Options struct {
	// Concurrency bounds how many workload clusters are read or cleaned up at once
	// (DefaultConcurrency).
	Concurrency int
	// LeaseDuration is how long an apply's Lease outlives a holder that stopped renewing it, so
	// how long the next apply waits after a killed one (DefaultLeaseDuration).
	LeaseDuration time.Duration
}

// New returns a service for the management cluster mgmt.
func New(mgmt *fleet.Management, opts Options) *Service {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	s := &Service{mgmt: mgmt, concurrency: opts.Concurrency, leaseDuration: opts.LeaseDuration, clock: engine.SystemClock{},
		conns: map[string]*conn{}, goneReason: mgmt.GoneReason, retryWait: time.Second}
	s.dial = s.dialWorkload
	return s
}

// cluster returns the clients of one workload cluster, building them on first use and again when
// its kubeconfig changed (checked at most every connRecheck, or at once after recheck).
func (s *Service) cluster(ctx context.Context, namespace, name string, force bool) (*conn, error) {
	id := namespace + "/" + name
	s.mu.Lock()
	if c, ok := s.conns[id]; ok && c.force == force && s.clock.Now().Sub(c.checked) < connRecheck {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := s.dial(ctx, namespace, name, force)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.checked = s.clock.Now()
	s.conns[id] = c
	return c, nil
}

// recheck makes the next cluster call for namespace/name read its kubeconfig Secret again: a
// rollout does so before it changes a cluster, so that a rotated or deleted kubeconfig is seen.
func (s *Service) recheck(namespace, name string) {
	if s.mgmt != nil {
		s.mgmt.ForgetListed(namespace, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[namespace+"/"+name]; ok {
		c.checked = time.Time{}
	}
}

// dialWorkload builds the clients of one workload cluster from its kubeconfig Secret, reusing
// the cached ones when the kubeconfig did not change.
func (s *Service) dialWorkload(ctx context.Context, namespace, name string, force bool) (*conn, error) {
	id := namespace + "/" + name
	cfg, err := s.mgmt.WorkloadConfig(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	c, ok := s.conns[id]
	s.mu.Unlock()
	if ok && c.cfg != nil && c.cfg.Host == cfg.Host && string(c.cfg.CertData) == string(cfg.CertData) &&
		c.cfg.BearerToken == cfg.BearerToken && c.force == force {
		return c, nil
	}
	mapper, err := s.mgmt.RESTMapper(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	applier, err := apply.New(cfg, apply.Options{FieldManager: apply.DefaultFieldManager, ForceConflicts: force, PollInterval: readinessPoll, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	return &conn{cfg: cfg, client: applier.Client(), applier: applier, force: force}, nil
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
