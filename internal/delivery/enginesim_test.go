package delivery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The engine's random-fault simulation (internal/engine/sim_test.go) over the real delivery
// World, once with each delivery engine: directly over the fake workload clusters of
// fake_test.go, and through Flux over a fake management cluster with a fake
// kustomize-controller (fakeflux_test.go). Each seed draws one fleet, its starting states, its
// faults and a policy, and runs it through both engines, each fault as the engine meets it:
//
//	fault                      direct                          Flux
//	revision fails at verify   Deployment never ready          HealthCheckFailed
//	revision refused at apply  admission webhook denies        dry-run failed (Invalid)
//	infrastructure at apply    runner forbidden (RBAC)         dry-run failed (ServiceUnavailable)
//	webhook down at apply      fail-closed webhook unreachable dry-run failed (InternalError,
//	                           (InternalError)                 failed calling webhook)
//	infrastructure at verify   API unreachable while waiting   controller stops before a word
//	revision, restore broken   Deployment never ready, 503s    HealthCheckFailed, then stops
//	                           on every restore write
//
// beside what each engine meets on its own: throttled records writes (direct); a Ready left
// from the older revision at the new generation, a finalizer held on delete, a controller that
// stops altogether mid-run (Flux); and, on both, requests of the records and the ledger failing
// at random (503, 429) through controller-runtime's interceptor. After each run the same
// invariants are checked of both engines, on what the clusters really run and what the records
// and the ledger hold:
//
//   - a revision is recorded invalid (the outcome, the cluster's records, the ledger) and counted
//     against the budget only when the fault injected on that cluster was the revision's;
//   - every cluster ends on the new revision (succeeded), back on its restore point (restored,
//     rolled back, failed), or unsettled (provisioning recorded, or nothing changed at all);
//     one the run did not reach is untouched;
//   - nothing is pinned, applied or deleted outside the open batch of a started wave (or
//     rollback), and Flux applies to no cluster whose wave has not started;
//   - no more than update_limit clusters are in change at once, and no batch is larger;
//   - the run terminates, within a bound of virtual time.

// The test's names of what may run on a cluster.
const (
	simOld     = "old"
	simDesired = "desired"
)

// simFault is the fault drawn for one cluster, as each engine meets it.
type simFault struct {
	name     string
	revision bool // the revision's own fault: the only one that may make it invalid
	direct   faults
	flux     fluxFault
}

// simFaultNames are the faults drawFault draws, each of which the simulation must meet.
var simFaultNames = []string{"none", "revision at verify", "revision at apply", "infrastructure at apply",
	"webhook down at apply", "infrastructure at verify", "revision, restore broken"}

// drawFault draws one cluster's fault.
func drawFault(rng *rand.Rand) simFault {
	var f simFault
	switch rng.IntN(10) {
	case 0:
		f = simFault{name: "revision at verify", revision: true, direct: faults{neverReady: true}, flux: fluxFault{fail: fluxHealthCheck}}
	case 1:
		f = simFault{name: "revision at apply", revision: true, direct: faults{applyErr: errAdmission}, flux: fluxFault{fail: fluxDryRunInvalid}}
	case 2:
		f = simFault{name: "infrastructure at apply", direct: faults{applyErr: errRBAC}, flux: fluxFault{fail: fluxDryRun503}}
	case 3:
		f = simFault{name: "infrastructure at verify", direct: faults{unreachableVerify: true}, flux: fluxFault{stop: true}}
	case 4:
		f = simFault{name: "revision, restore broken", revision: true, direct: faults{neverReady: true, restoreBroken: true},
			flux: fluxFault{fail: fluxHealthCheck, stopAfterVerdict: true}}
	case 5:
		f = simFault{name: "webhook down at apply", direct: faults{applyErr: errWebhookDown}, flux: fluxFault{fail: fluxDryRunWebhookDown}}
	default:
		f.name = "none"
	}
	if rng.IntN(4) == 0 {
		f.direct.throttle = 1 + rng.IntN(2)
	}
	f.flux.staleReady = rng.IntN(3) == 0
	f.flux.holdFinalizer = time.Duration(rng.IntN(5)) * time.Second
	return f
}

// simSeed is one seed's fleet, faults and policy.
type simSeed struct {
	seed        uint64
	names       []string
	starts      map[string]string // simOld, or "" (nothing of the rollout)
	faults      map[string]simFault
	updateLimit string
	maxFailures string
	onFailure   engine.OnFailure
	bake        time.Duration
	apiP        float64       // the chance that a records or ledger request fails
	fluxStopAt  time.Duration // the whole kustomize-controller stops this long into the run (0: never)
}

func drawSeed(seed uint64) simSeed {
	rng := rand.New(rand.NewPCG(seed, 0x5eed43))
	s := simSeed{seed: seed, starts: map[string]string{}, faults: map[string]simFault{}}
	for i := range 3 + rng.IntN(3) {
		name := fmt.Sprintf("c%d", i+1)
		s.names = append(s.names, name)
		if rng.IntN(4) != 0 {
			s.starts[name] = simOld
		}
		s.faults[name] = drawFault(rng)
	}
	s.updateLimit, s.maxFailures = fmt.Sprint(1+rng.IntN(3)), fmt.Sprint(rng.IntN(3))
	s.onFailure = engine.Rollback
	if rng.IntN(3) == 0 {
		s.onFailure = engine.Halt
	}
	s.bake = time.Duration(rng.IntN(2)) * time.Second
	s.apiP = []float64{0, 0, 0.03, 0.1}[rng.IntN(4)]
	if rng.IntN(6) == 0 {
		s.fluxStopAt = time.Duration(1+rng.IntN(20)) * time.Second
	}
	return s
}

func (s simSeed) policy(t testing.TB) engine.Policy {
	p := testPolicy(t, s.updateLimit, s.maxFailures, s.onFailure)
	p.VerifyTimeout, p.RollbackTimeout, p.BakeTime = 5*time.Second, 5*time.Second, s.bake
	return p
}

func (s simSeed) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "update_limit %s, max_failures %s, on_failure %s, bake %s, API faults %.2f, Flux stops at %s",
		s.updateLimit, s.maxFailures, s.onFailure, s.bake, s.apiP, s.fluxStopAt)
	for _, n := range s.names {
		f := s.faults[n]
		fmt.Fprintf(&b, "\n  %s starts %q, fault %q (direct %+v, flux %+v)", n, s.starts[n], f.name, f.direct, f.flux)
	}
	return b.String()
}

// simFleet is one engine's fleet for a seed: the service and spec to run, and how the test
// reads what the clusters run and what their records and the ledger hold (never through the
// faults).
type simFleet struct {
	t      *testing.T
	engine string
	seed   simSeed
	svc    *Service
	spec   Spec
	logf   func(string, map[string]any)
	// truth is what runs on a cluster: "", simOld, simDesired, or something else (a mix).
	truth func(name string) string
	// state is a cluster's records; ledger the management cluster's ledger.
	state  func(name string) *records.State
	ledger func() []records.InvalidEntry
	// finish checks what only the engine knows once the run is over.
	finish func(res engine.Result, tally *simTally)

	mu       sync.Mutex
	open     map[string]bool // the clusters of the open batch
	started  map[string]bool // the clusters of every batch started
	active   map[string]int  // clusters with an Apply, Verify or Restore in progress
	limit    int
	outside  []string // changes made outside the open batch
	overflow []string // moments more than update_limit clusters were in change
	changed  map[string]bool
}

// change is told of every change the engine makes to cluster (an apply, prune or delete; a pin
// or a Flux object deleted).
func (f *simFleet) change(cluster, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = map[string]bool{}
	}
	f.changed[cluster] = true
	if !f.open[cluster] {
		f.outside = append(f.outside, fmt.Sprintf("%s: %s at %s", cluster, what, time.Now().Format(time.StampMilli)))
	}
}

// reached says whether cluster's batch has started.
func (f *simFleet) reached(cluster string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started[cluster]
}

// simWatch wraps the delivery World to follow the batches and the clusters in change.
type simWatch struct {
	engine.World
	f *simFleet
}

func (w *simWatch) Held(target string) string {
	if h, ok := w.World.(engine.Holder); ok {
		return h.Held(target)
	}
	return ""
}

func (w *simWatch) enter(target string) func() {
	f := w.f
	f.mu.Lock()
	f.active[target]++
	if len(f.active) > f.limit {
		f.overflow = append(f.overflow, fmt.Sprintf("%d clusters in change (%v), update_limit %d", len(f.active), sortedKeys(f.active), f.limit))
	}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.active[target]--; f.active[target] == 0 {
			delete(f.active, target)
		}
		f.mu.Unlock()
	}
}

func (w *simWatch) Apply(ctx context.Context, target, revision string) error {
	defer w.enter(target)()
	return w.World.Apply(ctx, target, revision)
}

func (w *simWatch) Verify(ctx context.Context, target, revision string) error {
	defer w.enter(target)()
	return w.World.Verify(ctx, target, revision)
}

func (w *simWatch) Restore(ctx context.Context, target, revision string) error {
	defer w.enter(target)()
	return w.World.Restore(ctx, target, revision)
}

func (w *simWatch) Record(ctx context.Context, ev engine.Event) error {
	f := w.f
	if ev.Kind == engine.EventBatchStarted {
		f.mu.Lock()
		if len(ev.Targets) > f.limit {
			f.overflow = append(f.overflow, fmt.Sprintf("%s %d holds %v, update_limit %d", ev.Phase, ev.Batch, ev.Targets, f.limit))
		}
		f.open = map[string]bool{}
		for _, n := range ev.Targets {
			f.open[n], f.started[n] = true, true
		}
		f.mu.Unlock()
	}
	err := w.World.Record(ctx, ev)
	if ev.Kind == engine.EventBatchDone {
		f.mu.Lock()
		f.open = map[string]bool{}
		f.mu.Unlock()
	}
	return err
}

// simDirect is the seed's fleet delivered directly: the fake workload clusters of fake_test.go,
// their records and the ledger reached through the API faults.
func simDirect(t *testing.T, s simSeed, api *apiFaults) *simFleet {
	var specs []clusterSpec
	for _, n := range s.names {
		st := startFresh
		if s.starts[n] == simOld {
			st = startOld
		}
		specs = append(specs, clusterSpec{name: n, start: st, faults: s.faults[n].direct})
	}
	e := newEnv(t, s.policy(t), specs)
	e.spec.ClusterGates = false
	f := &simFleet{t: t, engine: "direct", seed: s, svc: e.svc, spec: e.spec, logf: e.logf}
	e.svc.mgmt = &fleet.Management{Client: interceptor.NewClient(e.mgmt, api.funcs())}
	e.svc.dial = func(ctx context.Context, namespace, name string, force bool) (*conn, error) {
		c, err := e.dial(ctx, namespace, name, force)
		if err != nil {
			return nil, err
		}
		return &conn{client: interceptor.NewClient(e.clusters[name].rec, api.funcs()),
			applier: simApplier{objectApplier: c.applier, change: func(op string) { f.change(name, op) }}}, nil
	}
	f.truth = func(name string) string {
		c := e.clusters[name]
		switch live := c.describeLive(); live {
		case e.objectsOf(c, ""):
			return ""
		case e.objectsOf(c, e.desired.revision):
			return simDesired
		case e.objectsOf(c, e.old.revision):
			return simOld
		default:
			return "a mix:\n" + live
		}
	}
	f.state = func(name string) *records.State { return e.load(e.clusters[name]) }
	f.ledger = func() []records.InvalidEntry {
		l, err := records.NewManagementStore(e.mgmt, e.spec.RecordNamespace).Ledger(context.Background(), e.spec.Key)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	f.finish = func(engine.Result, *simTally) {}
	return f
}

// simApplier tells the fleet of every change the direct engine makes to a workload cluster.
type simApplier struct {
	objectApplier
	change func(op string)
}

func (a simApplier) Apply(ctx context.Context, objs []*unstructured.Unstructured) (*apply.Result, error) {
	a.change("apply")
	return a.objectApplier.Apply(ctx, objs)
}

func (a simApplier) Prune(ctx context.Context, previous apply.Inventory, objs []*unstructured.Unstructured) (*apply.DeleteResult, error) {
	a.change("prune")
	return a.objectApplier.Prune(ctx, previous, objs)
}

func (a simApplier) Delete(ctx context.Context, inv apply.Inventory) (*apply.DeleteResult, error) {
	a.change("delete")
	return a.objectApplier.Delete(ctx, inv)
}

func (a simApplier) Revert(ctx context.Context, saved []*unstructured.Unstructured) error {
	a.change("revert")
	return a.objectApplier.Revert(ctx, saved)
}

// simFlux is the seed's fleet delivered through Flux: a fake management cluster (records,
// ledger, Flux objects, all reached through the API faults), a fake kustomize-controller and an
// in-memory registry. The controller runs until ctx ends.
func simFlux(ctx context.Context, t *testing.T, s simSeed, api *apiFaults, registries *registryTransport) *simFleet {
	old, desired := newFixture(t, oldManifests), newFixture(t, desiredManifests)
	key := records.Key{Kind: "rollout", Namespace: "fleet", Name: "web"}
	ff := newFakeFlux(t, key, "fleet", api)
	oldDigest, names := fluxDigests(t, old, desired)
	ff.revisionOf = names
	host := fmt.Sprintf("registry-%d.sim.test", s.seed)
	registries.serve(host, inMemoryRegistry())
	var logs []string
	var logMu sync.Mutex
	logf := func(msg string, _ map[string]any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, time.Now().Format(time.StampMilli)+" "+msg)
	}
	svc := (&Service{engine: directEngine{}, mgmt: &fleet.Management{Client: ff.api}, concurrency: 4, clock: engine.SystemClock{},
		retryWait: time.Millisecond, recheck: func(string, string) {},
		goneReason: func(context.Context, string, string, bool) (string, error) { return "", nil }}).
		WithFlux(&FluxSettings{Repository: "oci://" + host + "/gradual/web"})
	spec := Spec{Key: key, ClusterNamespace: "fleet", RecordNamespace: "gradual-system", Objects: desired.set,
		Revision: desired.revision, Policy: s.policy(t)}
	f := &simFleet{t: t, engine: "flux", seed: s, svc: svc, spec: spec, logf: logf}
	ff.changed = f.change
	ff.mayApply = f.reached
	store := records.NewWorkloadStore(ff.base, spec.RecordNamespace)
	bg := context.Background()
	for i, n := range s.names {
		digest := ""
		if s.starts[n] == simOld {
			digest = oldDigest
			rkey := FluxRecordKey(key, n)
			if err := store.MarkProvisioning(bg, rkey, old.record()); err != nil {
				t.Fatal(err)
			}
			if err := store.MarkCurrent(bg, rkey, old.revision); err != nil {
				t.Fatal(err)
			}
		}
		ff.addCluster(n, digest, s.faults[n].flux, s.seed*16+uint64(i))
	}
	if s.fluxStopAt > 0 {
		ff.stopAt = time.Now().Add(s.fluxStopAt)
	}
	go ff.run(ctx)
	f.truth = ff.truth
	f.state = func(name string) *records.State {
		st, err := store.Load(bg, FluxRecordKey(key, name))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	f.ledger = func() []records.InvalidEntry {
		l, err := records.NewManagementStore(ff.base, spec.RecordNamespace).Ledger(bg, key)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	f.finish = func(res engine.Result, tally *simTally) {
		ff.mu.Lock()
		defer ff.mu.Unlock()
		for _, fc := range ff.clusters {
			tally.mu.Lock()
			tally.pruned += len(fc.pruned)
			tally.mu.Unlock()
		}
		for _, o := range ff.outOfWave {
			t.Errorf("flux: kustomize-controller applied to a cluster no wave had reached: %s", o)
		}
		for _, o := range res.Outcomes {
			fc := ff.clusters[o.Target]
			// Prune on delete: a cluster restored to nothing had its Kustomization deleted and
			// what Flux applied pruned.
			if (o.Status == engine.StatusRestored || o.Status == engine.StatusRolledBack || o.Status == engine.StatusFailed ||
				o.Status == engine.StatusLostContact) && !o.Unsettled && o.Revision == "" {
				ks := ff.kustomization(o.Target)
				if err := ff.base.Get(bg, client.ObjectKeyFromObject(ks), ks); err == nil {
					t.Errorf("flux: %s restored to nothing, but its Kustomization is still there", o.Target)
				}
				if fc.applied != "" {
					t.Errorf("flux: %s restored to nothing, but %s still runs there", o.Target, ff.revisionOf[fc.applied])
				}
			}
		}
		if t.Failed() {
			for _, n := range s.names {
				fc := ff.clusters[n]
				t.Logf("flux: %s applied %v, pruned %d, stopped %v", n, fc.history, len(fc.pruned), fc.stopped)
			}
			logMu.Lock()
			t.Logf("log:\n  %s", strings.Join(logs, "\n  "))
			logMu.Unlock()
		}
	}
	return f
}

// simTally counts outcomes over the seeds of one engine, to show the simulation is not vacuous.
type simTally struct {
	mu                                        sync.Mutex
	succeeded, invalid, restored, unsettled   int
	notStarted, apiFaults, revisionFaultsSeen int
	pruned                                    int // Flux: Kustomizations deleted and pruned
	// reached counts, by fault, the clusters a wave reached: each fault must be met.
	reached map[string]int
}

// run plans the rollout from the records (as Observe does), runs it on the engine's World and
// checks the invariants.
func (f *simFleet) run(tally *simTally, api *apiFaults) {
	t := f.t
	t.Helper()
	ctx := context.Background()
	initial := map[string]string{}
	initialRecords := map[string]string{}
	var targets []engine.Target
	for _, name := range f.seed.names {
		rec, _, err := observeOne(ctx, f.svc, f.spec, name)
		if err != nil {
			t.Fatalf("%s: observe %s: %v", f.engine, name, err)
		}
		targets = append(targets, engine.Target{Name: name, Record: rec})
		initial[name] = f.truth(name)
		initialRecords[name] = describeState(f.state(name))
	}
	plan := engine.PlanRollout(targets, f.spec.Revision, f.spec.Policy)
	f.open, f.started, f.active, f.limit = map[string]bool{}, map[string]bool{}, map[string]int{}, plan.UpdateLimit
	pstore := records.NewManagementStore(newFakeClient(), f.spec.RecordNamespace) // apart, as env.run keeps it
	progress := &progressWriter{store: pstore, key: f.spec.Key, progress: records.Progress{
		Phase: records.PhaseRunning, Revision: f.spec.Revision, Waves: len(plan.Waves), Clusters: map[string]records.ClusterOutcome{},
	}}
	progress.save(ctx)
	w := &world{svc: f.svc, spec: f.spec, progress: progress, logf: f.logf, untouched: untouchedOf(plan)}
	w.engine = w.svc.engine.run(w)
	api.armed.Store(true)
	began := time.Now()
	res := engine.Execute(ctx, plan, &simWatch{World: w, f: f}, f.svc.clock, f.spec.Policy)
	progress.finish(ctx, &res)
	if took := time.Since(began); took > time.Hour {
		t.Errorf("%s: the run took %s of virtual time", f.engine, took)
	}
	f.check(plan, res, initial, initialRecords, tally)
	tally.mu.Lock()
	tally.apiFaults += api.injected()
	tally.mu.Unlock()
	f.finish(res, tally)
	if t.Failed() {
		t.Logf("%s: seed %s", f.engine, f.seed)
		t.Logf("plan:\n  %s", strings.Join(plan.Notes, "\n  "))
		for _, o := range res.Outcomes {
			t.Logf("outcome %s: %s on %q failed=%v invalid=%v unsettled=%v error=%q", o.Target, o.Status, o.Revision, o.Failed, o.Invalid, o.Unsettled, o.Error)
		}
	}
}

// revisionName is the test's name of a revision ("" stays "").
func (f *simFleet) revisionName(rev string) string {
	switch rev {
	case "":
		return ""
	case f.spec.Revision:
		return simDesired
	}
	return simOld // the only other revision of the fixtures
}

func (f *simFleet) check(plan engine.Plan, res engine.Result, initial, initialRecords map[string]string, tally *simTally) {
	t := f.t
	t.Helper()
	f.mu.Lock()
	for _, o := range f.outside {
		t.Errorf("%s: a change outside the open batch of a started wave: %s", f.engine, o)
	}
	for _, o := range f.overflow {
		t.Errorf("%s: %s", f.engine, o)
	}
	changed := f.changed
	f.mu.Unlock()
	desired := f.spec.Revision
	var invalid []string
	for _, o := range res.Outcomes {
		fault := f.seed.faults[o.Target]
		st := f.state(o.Target)
		now, truth := describeState(st), f.truth(o.Target)
		errorf := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%s: %s (%s, fault %q): %s", f.engine, o.Target, o.Status, fault.name, fmt.Sprintf(format, args...))
		}
		_, recordedInvalid := st.InvalidRevisions()[desired]
		if o.Invalid {
			invalid = append(invalid, o.Target)
		}
		// Blame: only the revision's own fault makes it invalid or counts it.
		if (o.Invalid || recordedInvalid) && !fault.revision {
			errorf("recorded invalid (outcome %v, records %s) without a fault of the revision", o.Invalid, now)
		}
		if o.Failed && !fault.revision {
			errorf("counted against the budget without a fault of the revision")
		}
		if o.Invalid != recordedInvalid {
			errorf("outcome invalid %v, the cluster's records %s", o.Invalid, now)
		}
		restorePoint := f.revisionName(plan.Intents[o.Target].RestoreTo)
		cur := ""
		if st.Current != nil {
			cur = st.Current.Revision
		}
		settledOn := func(rev string) {
			t.Helper()
			if truth != f.revisionName(rev) {
				errorf("runs %q, want %q", truth, f.revisionName(rev))
			}
			if cur != rev || st.Provisioning != nil {
				errorf("records %s, want current %q and settled", now, f.revisionName(rev))
			}
		}
		switch o.Status {
		case engine.StatusSucceeded:
			settledOn(desired)
		case engine.StatusFailed, engine.StatusRestored, engine.StatusRolledBack, engine.StatusLostContact:
			if !o.Unsettled {
				if truth != restorePoint {
					errorf("runs %q, want its restore point %q", truth, restorePoint)
				}
				if f.revisionName(cur) != restorePoint || st.Provisioning != nil {
					errorf("records %s, want current %q and settled", now, restorePoint)
				}
				break
			}
			fallthrough
		case engine.StatusUnsettled:
			// Left for the next run: its change in flight recorded, or nothing changed at all.
			if st.Provisioning == nil && (now != initialRecords[o.Target] || truth != initial[o.Target]) {
				errorf("unsettled, records %s (were %s), runs %q (ran %q): a change in flight not recorded", now, initialRecords[o.Target], truth, initial[o.Target])
			}
			if !o.Unsettled {
				errorf("unsettled, but the outcome says settled")
			}
		case engine.StatusNotStarted, engine.StatusAlreadyCurrent, engine.StatusSkipped:
			if truth != initial[o.Target] || now != initialRecords[o.Target] || changed[o.Target] {
				errorf("touched: runs %q (ran %q), records %s (were %s)", truth, initial[o.Target], now, initialRecords[o.Target])
			}
		default:
			errorf("unexpected status")
		}
		tally.mu.Lock()
		switch {
		case o.Status == engine.StatusSucceeded:
			tally.succeeded++
		case o.Status == engine.StatusNotStarted:
			tally.notStarted++
		case o.Unsettled:
			tally.unsettled++
		default:
			tally.restored++
		}
		if o.Invalid {
			tally.invalid++
		}
		if fault.revision && o.Status != engine.StatusNotStarted {
			tally.revisionFaultsSeen++
		}
		if o.Status != engine.StatusNotStarted {
			tally.reached[fault.name]++
		}
		tally.mu.Unlock()
	}
	// The ledger holds the desired revision only for clusters whose fault was the revision's.
	for _, entry := range f.ledger() {
		if entry.Revision != desired {
			t.Errorf("%s: the ledger holds revision %s", f.engine, entry.Revision)
			continue
		}
		for _, c := range entry.Clusters {
			if !f.seed.faults[c].revision {
				t.Errorf("%s: the ledger blames the revision on %s (fault %q): %s", f.engine, c, f.seed.faults[c].name, entry.Reason)
			}
			if !slices.Contains(invalid, c) {
				t.Errorf("%s: the ledger names %s, whose outcome is not invalid", f.engine, c)
			}
		}
	}
}

// TestEngineSimulation runs the engine's random-fault simulation over both delivery engines:
// each seed's fleet, faults and policy once directly and once through Flux, the same
// invariants checked of both (see the top of this file).
func TestEngineSimulation(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	registries := inMemoryRegistries(t)
	tallies := map[string]*simTally{"direct": {reached: map[string]int{}}, "flux": {reached: map[string]int{}}}
	t.Run("seeds", func(t *testing.T) {
		for seed := range uint64(seeds) {
			s := drawSeed(seed)
			for _, name := range []string{"direct", "flux"} {
				t.Run(fmt.Sprintf("%s seed %d", name, seed), func(t *testing.T) {
					t.Parallel() // each run is its own bubble, on its own fakes
					synctest.Test(t, func(t *testing.T) {
						api := &apiFaults{seed: seed, p: s.apiP}
						ctx, stop := context.WithCancel(context.Background())
						defer stop()
						var f *simFleet
						if name == "direct" {
							f = simDirect(t, s, api)
						} else {
							f = simFlux(ctx, t, s, api, registries)
						}
						f.run(tallies[name], api)
					})
				})
			}
		}
	})
	for name, tl := range tallies {
		t.Logf("%s: %d succeeded, %d restored, %d unsettled, %d not started; %d invalid of %d clusters with the revision's fault reached; %d API faults injected; %d pruned on delete",
			name, tl.succeeded, tl.restored, tl.unsettled, tl.notStarted, tl.invalid, tl.revisionFaultsSeen, tl.apiFaults, tl.pruned)
		if !testing.Short() && (tl.succeeded == 0 || tl.restored == 0 || tl.unsettled == 0 || tl.invalid == 0 || tl.apiFaults == 0 || (name == "flux" && tl.pruned == 0)) {
			t.Errorf("%s: the simulation missed an outcome it should reach", name)
		}
		t.Logf("%s: clusters reached, by fault: %v", name, tl.reached)
		for _, fault := range simFaultNames {
			if !testing.Short() && tl.reached[fault] == 0 {
				t.Errorf("%s: no wave reached a cluster with the fault %q", name, fault)
			}
		}
	}
}
