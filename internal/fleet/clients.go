package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// ClientsRecheck is how long a workload cluster's clients are used without looking at its
// kubeconfig Secret again. A wave calls on each cluster several times (record, apply, verify,
// record); looking each time would cost the management cluster a request per call.
const ClientsRecheck = 30 * time.Second

// ReadinessPoll is how often an Applier built by Clients reads its objects' status while it
// waits for them to be ready. A wave ends on a poll, so this bounds what waiting costs over
// kubectl's watch (make bench: 2 s polls made the provider ~1.3x kubectl, 0.5 s ~1.0x); a read
// per object every 0.5 s is a light load for an API server.
const ReadinessPoll = 500 * time.Millisecond

// Clients owns the clients of every workload cluster of one management cluster, for the
// provider process's lifetime: rollouts, module assignments and in-place updates all take
// theirs here, so that each cluster is connected to once and under one freshness rule.
//
// The rule: a cluster's clients are reused for ClientsRecheck, or until Recheck; then the
// kubeconfig Secret is looked at again (from Discover's recent list when there is one), and the
// clients are rebuilt only when the Secret's UID or resourceVersion changed. A deleted Secret
// is an error wrapping NotFound, so that callers can tell a cluster gone.
type Clients struct {
	mgmt *Management
	now  func() time.Time

	mu      sync.Mutex
	entries map[string]*Conn // keyed namespace/name
}

// Conn is one workload cluster's clients. Callers must not change what it holds.
type Conn struct {
	// Config is the REST config built from the kubeconfig Secret (a copy: callers may derive
	// their own from it).
	Config *rest.Config
	// Client is the Applier's client (client-go's scheme), for reads and the workload records.
	Client client.Client
	// Applier applies with the default field manager, without ForceConflicts (see
	// apply.Applier.WithForceConflicts), polling readiness every ReadinessPoll.
	Applier *apply.Applier

	version string    // the kubeconfig Secret's UID/resourceVersion the clients were built from
	checked time.Time // when that version was last confirmed
}

// NewClients returns the client owner of mgmt's workload clusters. now is the clock the
// freshness rule reads (nil: the wall clock).
func NewClients(mgmt *Management, now func() time.Time) *Clients {
	if now == nil {
		now = clock.System{}.Now
	}
	return &Clients{mgmt: mgmt, now: now, entries: map[string]*Conn{}}
}

// Management is the management cluster whose workload clusters these are.
func (c *Clients) Management() *Management { return c.mgmt }

// Get returns the clients of the workload cluster namespace/name, building them on first use
// and again when its kubeconfig Secret changed (see Clients for when that is looked at).
func (c *Clients) Get(ctx context.Context, namespace, name string) (*Conn, error) {
	id := namespace + "/" + name
	c.mu.Lock()
	cached := c.entries[id]
	if cached != nil && c.now().Sub(cached.checked) < ClientsRecheck {
		c.mu.Unlock()
		return cached, nil
	}
	c.mu.Unlock()

	cfg, version, err := c.mgmt.workloadConfig(ctx, namespace, name)
	if err != nil {
		// The management cluster cannot say now (slow, paused, throttled): clients that worked
		// stay in use, since restoring a workload cluster must not wait on the management
		// cluster; the next Get asks again. Only an answer — the Secret is gone or unusable —
		// retires them.
		if unread := (secretUnread{}); cached != nil && errors.As(err, &unread) {
			return cached, nil
		}
		return nil, err
	}
	if cached != nil && cached.version == version {
		c.mu.Lock()
		defer c.mu.Unlock()
		cached.checked = c.now()
		return cached, nil
	}
	mapper, err := c.mgmt.RESTMapper(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	applier, err := apply.New(cfg, apply.Options{FieldManager: apply.DefaultFieldManager, PollInterval: ReadinessPoll, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	conn := &Conn{Config: cfg, Client: applier.Client(), Applier: applier, version: version, checked: c.now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[id] = conn
	return conn, nil
}

// Client returns the client of the workload cluster namespace/name (see Get).
func (c *Clients) Client(ctx context.Context, namespace, name string) (client.Client, error) {
	conn, err := c.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return conn.Client, nil
}

// Recheck makes the next Get of namespace/name read its kubeconfig Secret itself: a rollout
// calls it before it changes a cluster, so that a Secret rotated or deleted seconds ago is seen
// then, not after ClientsRecheck or Discover's list goes stale.
func (c *Clients) Recheck(namespace, name string) {
	c.mgmt.ForgetListed(namespace, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.entries[namespace+"/"+name]; ok {
		conn.checked = time.Time{}
	}
}
