package delivery

import (
	"context"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
)

// Service carries revisions to the clusters of one management cluster.
type Service struct {
	mgmt        *fleet.Management
	concurrency int
	// leaseDuration is how long the Lease of an apply outlives a holder that stopped renewing it.
	leaseDuration time.Duration
	clock         engine.Clock

	// The seams between the rollout logic and the clusters, replaced by unit tests with fakes
	// that inject faults: dial returns the clients of one workload cluster (fleet.Clients
	// owns and caches them), recheck makes the next dial of a cluster read its kubeconfig
	// Secret again, discover lists the Clusters a query picks (fleet.Management.Discover),
	// goneReason says whether a cluster left the fleet (fleet.Management.GoneReason, or
	// ClusterGoneReason withoutSecrets), retryWait is how long the first retry of an
	// infrastructure failure waits (it doubles up to maxRetryWait). Call discover and
	// goneReason through fleetOf and goneOf, which keep Flux mode off Secrets.
	dial       func(ctx context.Context, namespace, name string, force bool) (*conn, error)
	recheck    func(namespace, name string)
	discover   func(ctx context.Context, q fleet.Query) (*fleet.Discovery, error)
	goneReason func(ctx context.Context, namespace, name string, withoutSecrets bool) (string, error)
	retryWait  time.Duration
	// gate reads a cluster's gates (gate.go): "" when healthy; nil reads none.
	gate func(ctx context.Context, namespace, name string, workload bool) (blame.GateReading, error)

	// engine is how revisions reach the clusters (port.go): directEngine, unless WithFlux chose
	// fluxEngine.
	engine deliveryEngine
	// previous is the engine the rollout moves from (move.go: MovingFrom), nil when it moves
	// from none: it is in charge of each cluster until that cluster verifies on engine.
	previous deliveryEngine

	// shared hands a refresh's Flux reads to the plan after it (sharedreads.go); reads says
	// whether this copy of the service keeps them (Refreshing), takes them (Planning) or
	// neither. nil: no sharing (tests that build a Service by hand).
	shared *sharedReads
	reads  readRole
}

// conn is one workload cluster's clients as a rollout uses them: the shared ones of
// fleet.Clients, with the rollout's own force_conflicts and field manager.
type conn struct {
	cfg     *rest.Config
	client  client.Client
	applier objectApplier
	// manager is the field manager the applier applies with: the rollout's own
	// (records.Key.FieldManager).
	manager string
}

// objectApplier is what delivery does with a workload cluster's objects: *apply.Applier, or a
// fake in unit tests.
type objectApplier interface {
	Check(ctx context.Context, objs []*unstructured.Unstructured) error
	Preview(ctx context.Context, objs []*unstructured.Unstructured) (*apply.PreviewResult, error)
	Apply(ctx context.Context, objs []*unstructured.Unstructured) (*apply.Result, error)
	Prune(ctx context.Context, previous apply.Inventory, objs []*unstructured.Unstructured) (*apply.DeleteResult, error)
	Delete(ctx context.Context, inv apply.Inventory) (*apply.DeleteResult, error)
	WaitDeleted(ctx context.Context, refs []apply.ObjectRef) error
	Wait(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error
	Drift(ctx context.Context, objs []*unstructured.Unstructured) ([]apply.Drift, error)
	Existing(ctx context.Context, objs []*unstructured.Unstructured) ([]apply.Existing, error)
	Release(ctx context.Context, refs []apply.ObjectRef) error
	Orphan(ctx context.Context, refs []apply.ObjectRef) error
	TakeOver(ctx context.Context, refs []apply.ObjectRef) error
	Forget(ctx context.Context, refs []apply.ObjectRef, manager string) error
	Revert(ctx context.Context, saved []*unstructured.Unstructured) error
}

// as returns c with an applier that applies, prunes, deletes, reverts, releases and checks
// drift with key's own field manager (records.Key.FieldManager), so that server-side apply
// tells two rollouts apart; c itself, shared by every rollout that reaches the cluster, stays
// as it is. A fake applier is kept, only the manager is set.
func (c *conn) as(key records.Key) *conn {
	out := *c
	out.manager = key.FieldManager()
	if a, ok := c.applier.(*apply.Applier); ok {
		out.applier = a.WithFieldManager(out.manager)
	}
	return &out
}

// judging returns c with an applier whose waits judge the kinds h has expressions for by them;
// c itself stays as it is. Fakes are returned unchanged.
func (c *conn) judging(h *health.Checker) *conn {
	a, ok := c.applier.(*apply.Applier)
	if !ok || h.Empty() {
		return c
	}
	out := *c
	out.applier = a.WithHealth(h)
	return &out
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

// New returns a service for the workload clusters clients reaches, under the provider's
// settings: Parallelism bounds the clusters read or cleaned up at once outside the waves
// (refresh, plan, destroy; the waves are bounded by update_limit), LeaseDuration is each apply's
// Lease. Unset settings take their defaults.
func New(clients *fleet.Clients, set settings.Settings) *Service {
	set = set.WithDefaults()
	mgmt := clients.Management()
	s := &Service{engine: directEngine{}, mgmt: mgmt, concurrency: set.Parallelism, leaseDuration: set.LeaseDuration, clock: engine.SystemClock{},
		discover: mgmt.Discover, retryWait: time.Second, recheck: clients.Recheck,
		goneReason: func(ctx context.Context, namespace, name string, withoutSecrets bool) (string, error) {
			if withoutSecrets {
				return mgmt.ClusterGoneReason(ctx, namespace, name)
			}
			return mgmt.GoneReason(ctx, namespace, name)
		},
		dial: func(ctx context.Context, namespace, name string, force bool) (*conn, error) {
			c, err := clients.Get(ctx, namespace, name)
			if err != nil {
				return nil, err
			}
			return &conn{cfg: c.Config, client: c.Client, applier: c.Applier.WithForceConflicts(force)}, nil
		}}
	s.gate = s.clusterGate
	s.shared = newSharedReads()
	return s
}

// fleetOf lists the Clusters q picks, as the engine reads them (a Flux fleet reads no Secret).
func (s *Service) fleetOf(ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
	return s.engine.discover(s, ctx, q)
}

// goneOf says whether the cluster namespace/name left the fleet, as the engine judges it.
func (s *Service) goneOf(ctx context.Context, namespace, name string) (string, error) {
	return s.engine.goneReason(s, ctx, namespace, name)
}

// clusterObjects is the connection to the cluster name with the objects spec has for it.
func (s *Service) clusterObjects(ctx context.Context, spec Spec, name string) (*conn, []*unstructured.Unstructured, error) {
	objs, err := spec.ObjectsFor(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.cluster(ctx, spec.ClusterNamespace, name, spec.Key, spec.ForceConflicts)
	return c, objs, err
}

// cluster returns the clients of one workload cluster as key uses them: with key's field
// manager, and force_conflicts as force. Only the direct engine connects to workload clusters.
func (s *Service) cluster(ctx context.Context, namespace, name string, key records.Key, force bool) (*conn, error) {
	c, err := s.dial(ctx, namespace, name, force)
	if err != nil {
		return nil, err
	}
	return c.as(key), nil
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
		g    errgroup.Group
	)
	g.SetLimit(s.concurrency)
	for _, name := range names {
		g.Go(func() error {
			if err := fn(ctx, name); err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
			return nil // every name runs; the errors are returned by name
		})
	}
	_ = g.Wait()
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
