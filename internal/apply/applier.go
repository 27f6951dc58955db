package apply

import (
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// DefaultFieldManager is the server-side apply field manager of an Applier that is given none:
// the one every rollout and module assignment shared before each got its own
// (records.Key.FieldManager, see WithFieldManager). An Applier with another manager counts
// this one as its own too: it takes the fields it owns over on apply (see migrateLegacy), and
// it deletes, releases and adopts as if they were its own.
const DefaultFieldManager = records.LegacyFieldManager

// PruneAnnotation, set to "disabled" as an annotation or label on a live object, keeps Prune
// and Delete from deleting it.
const PruneAnnotation = "gradual.dev/prune"

// Options configure an Applier.
type Options struct {
	// FieldManager owns the applied fields; default DefaultFieldManager ("gradual").
	FieldManager string
	// ForceConflicts takes fields over from other server-side appliers (other field managers
	// with operation Apply). Without it such a conflict fails the apply with a ConflictError
	// before any object of the conflicting stage is applied. Fields last written by a plain
	// update (kubectl edit, scale, patch, client-side apply) are taken back either way: that
	// is drift being repaired. Fields another rollout or module assignment of this provider
	// applied (another key's field manager, see records.IsFieldManager) are never taken: that
	// conflict fails the apply even when forced.
	ForceConflicts bool
	// RecreateImmutable deletes and recreates an object whose change touches an immutable
	// field (ssa's Force). Without it such a change fails the apply.
	RecreateImmutable bool
	// PollInterval is how often waits read the objects' status; default 2s.
	PollInterval time.Duration
	// Concurrency bounds the concurrent dry-runs of one apply or drift check, the concurrent
	// applies of one kind in a stage, and the concurrent reads of one readiness check; default 4.
	Concurrency int
	// Mapper, when set, is the REST mapper to use: one shared by every cluster that the same API
	// server serves (see fleet.Management.RESTMapper). Default: one of the Applier's own.
	Mapper meta.RESTMapper
}

func (o *Options) defaults() {
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
}

// Applier applies, prunes, waits for and compares objects on one workload cluster.
type Applier struct {
	opts   Options
	client client.Client
	mapper meta.RESTMapper
	// discovery lists the namespaced kinds when Delete checks what a Namespace still holds.
	discovery discovery.DiscoveryInterface
	// applier applies; its client vets ssa's forced dry-runs for conflicts (see conflicts.go).
	applier *ssa.ResourceManager
	// reader waits, compares and deletes with the plain client.
	reader *ssa.ResourceManager
	// ignore names the fields left to other controllers (see WithIgnore).
	ignore Ignore
	// health judges the kinds it has CEL expressions for instead of kstatus (see WithHealth).
	health *health.Checker
	// poller and unvetted are what applier is built from (see WithForceConflicts).
	poller   *polling.StatusPoller
	unvetted client.WithWatch
}

// New builds an Applier for the cluster cfg reaches. It makes no request: API discovery
// happens lazily, per API group, and again when a kind is not known yet (a CRD just applied).
func New(cfg *rest.Config, opts Options) (*Applier, error) {
	if cfg == nil {
		return nil, errors.New("apply: no REST config")
	}
	opts.defaults()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("apply: HTTP client: %w", err)
	}
	mapper := opts.Mapper
	if mapper == nil {
		if mapper, err = apiutil.NewDynamicRESTMapper(cfg, httpClient); err != nil {
			return nil, fmt.Errorf("apply: REST mapper: %w", err)
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("apply: client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("apply: discovery client: %w", err)
	}
	a := &Applier{opts: opts, client: c, mapper: mapper, discovery: dc, unvetted: c,
		poller: polling.NewStatusPoller(c, mapper, polling.Options{})}
	a.applier = a.applyManager()
	a.reader = a.readManager()
	return a, nil
}

func (a *Applier) owner() ssa.Owner {
	return ssa.Owner{Field: a.opts.FieldManager, Group: "gradual.dev"}
}

// applyManager is the resource manager that applies: its client vets every apply for
// conflicts with other managers first (see conflicts.go).
func (a *Applier) applyManager() *ssa.ResourceManager {
	applyClient := interceptor.NewClient(a.unvetted, interceptor.Funcs{Patch: a.vetConflicts})
	m := ssa.NewResourceManager(applyClient, a.poller, a.owner())
	m.SetConcurrency(a.opts.Concurrency)
	return m
}

// readManager is the resource manager that waits, compares, reverts and deletes, with the
// plain client.
func (a *Applier) readManager() *ssa.ResourceManager {
	m := ssa.NewResourceManager(a.unvetted, a.poller, a.owner())
	m.SetConcurrency(a.opts.Concurrency)
	return m
}

// WithFieldManager returns an Applier like a that applies with field manager m (a rollout's
// own, records.Key.FieldManager). Like WithForceConflicts it shares a's connection, mapper and
// discovery cache; a itself is unchanged. An empty m is DefaultFieldManager.
func (a *Applier) WithFieldManager(m string) *Applier {
	if m == "" {
		m = DefaultFieldManager
	}
	if a.opts.FieldManager == m {
		return a
	}
	b := *a
	b.opts.FieldManager = m
	b.applier = b.applyManager()
	b.reader = b.readManager()
	return &b
}

// ours reports whether field manager m is the Applier's: its own, or the legacy one every
// rollout shared before (DefaultFieldManager), whose fields it takes over.
func (a *Applier) ours(m string) bool { return m == a.opts.FieldManager || m == DefaultFieldManager }

// migrateLegacy is the cleanup that makes an apply take over the fields the legacy field
// manager applied: ssa renames its entry to ours (merging the two) before applying, so the
// apply owns them alone and drops those it no longer sets, as if it had applied them itself.
// Nothing to do for an Applier that is the legacy manager.
func (a *Applier) migrateLegacy() ssa.ApplyCleanupOptions {
	if a.opts.FieldManager == DefaultFieldManager {
		return ssa.ApplyCleanupOptions{}
	}
	return ssa.ApplyCleanupOptions{FieldManagers: []ssa.FieldManager{
		{Name: DefaultFieldManager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationApply},
	}}
}

// WithForceConflicts returns an Applier like a that does or does not take fields over from
// other managers (Options.ForceConflicts). It shares a's connection, mapper and discovery
// cache, so one cached Applier per cluster serves every rollout, forcing or not; a itself is
// unchanged.
func (a *Applier) WithForceConflicts(force bool) *Applier {
	if a.opts.ForceConflicts == force {
		return a
	}
	b := *a
	b.opts.ForceConflicts = force
	b.applier = b.applyManager()
	return &b
}

// ForceConflicts says whether the Applier takes fields over from other managers.
func (a *Applier) ForceConflicts() bool { return a.opts.ForceConflicts }

// FieldManager is the field manager the Applier applies with.
func (a *Applier) FieldManager() string { return a.opts.FieldManager }

// Client is the Applier's client for the cluster (client-go's scheme), for callers that keep
// other objects there, such as the rollout records; sharing it shares the connection and
// discovery cache.
func (a *Applier) Client() client.Client { return a.client }
