package assignment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The fake fleet behind the deliverer seam: clusters whose modules are rolled out by the real
// engine (engine.PlanRollout, Plan.Follow, engine.Execute) over an in-memory World that keeps
// each module's records by the Event contract and injects faults; the management cluster is a
// controller-runtime fake client, so that bindings and the progress record are the real stores'.
// The fake checks at every call what must hold whatever the faults: a module goes only to
// clusters where the modules it depends on are bound applied, nothing is applied after the run
// was cancelled, no wave starts past the failure budget, every target has exactly one outcome,
// and nothing is written to the management cluster once the Lease is lost.

// modFaults are what goes wrong with one module on one cluster.
type modFaults struct {
	applyFails  bool // the API server rejects the revision (admission): a revision failure
	verifyFails bool // the revision never becomes ready: a revision failure
	lostContact bool // the cluster stops answering once the revision is applied (restore fails too)
	recordsDown bool // the provisioning record cannot be written: nothing changes
	goneAtApply bool // the cluster is deleted as the revision is applied to it
	cancel      bool // the apply is cancelled (Ctrl-C) as the revision is applied here
	loseLease   bool // the run's Lease is lost as the revision is applied here
}

func (f modFaults) String() string {
	var out []string
	for name, on := range map[string]bool{"applyFails": f.applyFails, "verifyFails": f.verifyFails, "lostContact": f.lostContact,
		"recordsDown": f.recordsDown, "goneAtApply": f.goneAtApply, "cancel": f.cancel, "loseLease": f.loseLease} {
		if on {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "+")
}

// modState is one module on one cluster: what runs there, and what its records say.
type modState struct {
	actual string
	rec    engine.TargetRecord
	// rendered is the digest of what the module rendered for the cluster when it was applied
	// there (with values): what delivery's records hold, in short.
	rendered string
	// unrecorded: its records are gone but its objects are there (delivery.StateRecordsMissing,
	// found by delivery's Observe with the bundle and by its Run).
	unrecorded bool
}

// fakeCluster is one workload cluster.
type fakeCluster struct {
	name        string
	picked      bool   // matches the assignment's selector
	skip        string // why it cannot be changed now ("" = eligible)
	deleted     bool   // its Cluster object is gone
	unreachable bool   // destroy cannot reach it
	labels      map[string]string
	mods        map[string]*modState
	faults      map[string]modFaults
	// checkJobFails fails the check Job on the cluster (its Failed condition); checkJobs lists,
	// per run of it, the module it ran after and the Job's namespace (rendered with values).
	checkJobFails bool
	checkJobs     []string
}

func (c *fakeCluster) mod(name string) *modState {
	if c.mods[name] == nil {
		c.mods[name] = &modState{rec: engine.TargetRecord{Invalid: map[string]string{}}}
	}
	return c.mods[name]
}

// runCall is one delivery run of a module.
type runCall struct {
	module string
	only   []string
	res    engine.Result
	err    error
}

// destroyCall is one removal of a module from clusters.
type destroyCall struct {
	module   string
	clusters []string
	keep     bool // KeepManagementRecords: the cluster leaves, the module stays elsewhere
	warnings []string
}

// fakeFleet implements deliverer.
type fakeFleet struct {
	t      testing.TB
	spec   Spec
	base   client.WithWatch // the management cluster without interception: what the test reads
	mgmt   client.Client    // the management cluster as the run reaches it
	claims map[string][]delivery.Claim

	mu       sync.Mutex
	clusters map[string]*fakeCluster
	runs     []runCall
	destroys []destroyCall
	log      []string
	// cancel cancels the run's context with a cause; fenced is set once the Lease is lost.
	cancel   context.CancelCauseFunc
	fenced   bool
	failMgmt bool // every write to the management cluster fails (it stopped answering)
	// reads counts the reads of the fleet: each Observe, ObserveRendered and Discover lists
	// the picked Clusters and reads their records, and so does each delivery Run (readsOfRun).
	reads int
}

var _ deliverer = (*fakeFleet)(nil)

func newFakeFleet(t testing.TB, spec Spec) *fakeFleet {
	f := &fakeFleet{t: t, spec: spec, clusters: map[string]*fakeCluster{}, claims: map[string][]delivery.Claim{}}
	f.base = fake.NewClientBuilder().Build()
	write := func(op string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fenced {
			f.t.Errorf("management cluster %s after the Lease was lost", op)
			return fmt.Errorf("fenced: %w", records.ErrLeaseLost)
		}
		if f.failMgmt {
			return apierrors.NewServiceUnavailable("the management cluster is not answering")
		}
		return nil
	}
	f.mgmt = interceptor.NewClient(f.base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := write("create " + obj.GetName()); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := write("update " + obj.GetName()); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := write("patch " + obj.GetName()); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := write("delete " + obj.GetName()); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	return f
}

// add puts a picked, eligible cluster in the fleet.
func (f *fakeFleet) add(name string) *fakeCluster {
	c := &fakeCluster{name: name, picked: true, mods: map[string]*modState{}, faults: map[string]modFaults{}}
	f.clusters[name] = c
	return c
}

// seed makes module run revision rev on cluster, recorded and bound applied (as an earlier
// apply left it).
func (f *fakeFleet) seed(cluster, module, rev string) {
	c := f.clusters[cluster]
	m := c.mod(module)
	m.actual, m.rec.Current, m.rec.Backup = rev, rev, rev
	f.bind(cluster, records.ModuleBinding{Module: module, Revision: rev, AppliedAt: seededAt, Result: records.BindingApplied})
}

// bind writes a binding as an earlier apply left it.
func (f *fakeFleet) bind(cluster string, b records.ModuleBinding) {
	err := records.NewBindingStore(f.base, f.spec.RecordNamespace).Update(context.Background(), f.spec.Key, cluster,
		func(old []records.ModuleBinding) []records.ModuleBinding {
			return append(slices.DeleteFunc(old, func(o records.ModuleBinding) bool { return o.Module == b.Module }), b)
		})
	if err != nil {
		f.t.Fatal(err)
	}
}

// bindings reads the bindings as they are now.
func (f *fakeFleet) bindings() map[string][]records.ModuleBinding {
	out, err := records.NewBindingStore(f.base, f.spec.RecordNamespace).List(context.Background(), f.spec.Key)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fakeFleet) progress() *records.Progress {
	p, err := records.NewManagementStore(f.base, f.spec.RecordNamespace).LoadProgress(context.Background(), f.spec.Key)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fakeFleet) logf(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

// moduleOf is the module a delivery key names.
func (f *fakeFleet) moduleOf(key records.Key) string {
	name, ok := strings.CutPrefix(key.Name, f.spec.Key.Name+".")
	if key.Kind != ModuleKind || !ok {
		f.t.Errorf("delivery called with key %s, not a module of %s", key, f.spec.Key)
	}
	return name
}

func (f *fakeFleet) ManagementClient() client.Client { return f.mgmt }

func (f *fakeFleet) discovered(c *fakeCluster) fleet.Cluster {
	return fleet.Cluster{Name: c.name, Namespace: f.spec.ClusterNamespace, SkipReason: c.skip, Labels: c.labels}
}

// ObserveRendered is Observe with what each current cluster renders now compared with what it
// got (modState.rendered), as delivery's is.
func (f *fakeFleet) ObserveRendered(ctx context.Context, q fleet.Query, key records.Key, ns string, r delivery.Rendering, ignore ...apply.IgnoreRule) (*delivery.Observation, error) {
	obs, err := f.Observe(ctx, q, key, ns, true, ignore...)
	if err != nil {
		return nil, err
	}
	module := f.moduleOf(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range obs.Discovery.Clusters {
		st, ok := obs.Clusters[c.Name]
		if !ok || st.State != delivery.StateCurrent || st.Revision != r.Revision || r.Values == nil {
			continue
		}
		set, err := manifest.Substitute(r.Template, r.Values.For(c))
		switch {
		case err != nil:
			st.State, st.Drift = delivery.StateValuesChanged, []string{"cannot be rendered: " + err.Error()}
		case renderedDigest(f.t, set) != f.clusters[c.Name].mod(module).rendered:
			st.State, st.Drift = delivery.StateValuesChanged, []string{"rendered " + renderedDigest(f.t, set)}
		}
		obs.Clusters[c.Name] = st
	}
	return obs, nil
}

// renderedDigest names what set holds, as delivery's records keep it (canonical JSON).
func renderedDigest(t testing.TB, set *manifest.Set) string {
	canonical, err := set.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return manifest.Digest(canonical)
}

func (f *fakeFleet) Observe(_ context.Context, _ fleet.Query, key records.Key, _ string, _ bool, _ ...apply.IgnoreRule) (*delivery.Observation, error) {
	module := f.moduleOf(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	obs := &delivery.Observation{Discovery: &fleet.Discovery{}, Clusters: map[string]delivery.ClusterState{}, Skipped: map[string]string{}}
	for _, name := range sortedNames(f.clusters) {
		c := f.clusters[name]
		if !c.picked || c.deleted {
			continue
		}
		obs.Discovery.Clusters = append(obs.Discovery.Clusters, f.discovered(c))
		if c.skip != "" {
			obs.Skipped[name] = c.skip
			continue
		}
		st := delivery.ClusterState{State: delivery.StatePending}
		if m := c.mods[module]; m != nil {
			switch {
			case m.unrecorded:
				st = delivery.ClusterState{State: delivery.StateRecordsMissing, Drift: []string{"Deployment demo/" + module}}
			case m.rec.Provisioning != "":
				st = delivery.ClusterState{State: delivery.StateProvisioning, Revision: m.rec.Current}
			case m.rec.Current != "":
				st = delivery.ClusterState{State: delivery.StateCurrent, Revision: m.rec.Current}
			}
		}
		obs.Clusters[name] = st
	}
	return obs, nil
}

func (f *fakeFleet) Discover(_ context.Context, q fleet.Query) (*fleet.Discovery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	d := &fleet.Discovery{}
	if len(q.Names) == 0 {
		for _, name := range sortedNames(f.clusters) {
			if c := f.clusters[name]; c.picked && !c.deleted {
				d.Clusters = append(d.Clusters, f.discovered(c))
			}
		}
		return d, nil
	}
	for _, name := range q.Names {
		if c := f.clusters[name]; c != nil && !c.deleted {
			d.Clusters = append(d.Clusters, f.discovered(c))
		} else {
			d.Missing = append(d.Missing, name)
		}
	}
	return d, nil
}

func (f *fakeFleet) Claims(_ context.Context, spec delivery.Spec, clusters []string, _ func(records.Key) bool) ([]delivery.Claim, error) {
	var out []delivery.Claim
	for _, c := range f.claims[f.moduleOf(spec.Key)] {
		if slices.Contains(clusters, c.Cluster) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run rolls one module out with the real engine over the fake World, as delivery.Run does
// (targets limited to Only, the plan's waves followed when known), and checks the invariants
// of what the engine did.
func (f *fakeFleet) Run(ctx context.Context, req delivery.RunRequest) (*delivery.RunResult, error) {
	module := f.moduleOf(req.Spec.Key)
	m, ok := f.spec.Module(module)
	if !ok || req.Spec.Revision != m.Revision {
		f.t.Errorf("run of %s revision %s, not a configured module", module, req.Spec.Revision)
	}
	if ctx.Err() != nil {
		f.t.Errorf("module %s delivered after the run was cancelled (%v)", module, context.Cause(ctx))
	}
	if !req.OnlyKnown {
		f.t.Errorf("module %s delivered without the clusters named", module)
	}
	bound := f.bindings()
	var targets []engine.Target
	planned := map[string]bool{}
	for _, wave := range req.Planned {
		for _, name := range wave {
			planned[name] = true
			if !slices.Contains(req.Only, name) {
				f.t.Errorf("module %s: planned wave holds %s, which the run does not target", module, name)
			}
		}
	}
	f.mu.Lock()
	for _, name := range req.Only {
		c := f.clusters[name]
		switch {
		case c == nil || c.skip != "":
			f.t.Errorf("module %s delivered to %s, which is not an eligible cluster", module, name)
			continue
		case !c.picked || c.deleted:
			continue // delivery's own observation does not find it: it changed since the run's
		}
		// The dependencies first: a module goes only where those it depends on are applied.
		for _, d := range m.DependsOn {
			if b, ok := (&Observation{Bindings: bound}).Binding(name, d); !ok || b.Result != records.BindingApplied {
				f.t.Errorf("module %s delivered to %s, where module %s it depends on is bound %+v", module, name, d, b)
			}
		}
		st := c.mod(module)
		t := engine.Target{Name: name, Record: st.rec, Drifted: planned[name] || f.spec.Mode == Reconcile && st.actual != st.rec.Current}
		if st.unrecorded {
			// As delivery's Run holds it back (delivery.HoldUnrecorded), unless adopted.
			t = delivery.HoldUnrecorded([]engine.Target{t}, map[string]delivery.ClusterState{name: {State: delivery.StateRecordsMissing,
				Drift: []string{"Deployment demo/" + module}}}, req.Spec.AdoptUnrecorded)[0]
		}
		targets = append(targets, t)
	}
	f.logf("run %s on %v", module, req.Only)
	f.reads += readsOfRun(req)
	f.mu.Unlock()

	plan := engine.PlanRollout(targets, req.Spec.Revision, req.Spec.Policy)
	if req.PlannedKnown {
		plan = plan.Follow(req.Planned, req.Spec.Policy)
	}
	w := &moduleWorld{f: f, module: module, plan: plan, spec: req.Spec}
	res := engine.Execute(ctx, plan, w, engine.SystemClock{}, req.Spec.Policy)
	f.checkRun(module, targets, plan, res, w)
	var err error
	if rerr := res.Err(); rerr != nil {
		err = fmt.Errorf("module %s did not complete revision %s: %w", module, req.Spec.Revision, rerr)
	}
	f.mu.Lock()
	f.runs = append(f.runs, runCall{module: module, only: slices.Clone(req.Only), res: res, err: err})
	f.mu.Unlock()
	return &delivery.RunResult{Plan: plan, Result: res}, err
}

// checkRun checks the engine's invariants on one module's run: every target has exactly one
// outcome, a failed or cancelled target is back on its backup, and the failure budget held.
func (f *fakeFleet) checkRun(module string, targets []engine.Target, plan engine.Plan, res engine.Result, w *moduleWorld) {
	seen := map[string]int{}
	failed := 0
	for _, o := range res.Outcomes {
		seen[o.Target]++
		if o.Failed {
			failed++
		}
		f.mu.Lock()
		st := f.clusters[o.Target].mod(module)
		actual, rec := st.actual, st.rec
		f.mu.Unlock()
		switch o.Status {
		case engine.StatusSucceeded:
			if actual != plan.Desired || rec.Current != plan.Desired || rec.Provisioning != "" {
				f.t.Errorf("module %s on %s succeeded but runs %q, records %+v", module, o.Target, actual, rec)
			}
		case engine.StatusFailed, engine.StatusCancelled, engine.StatusRolledBack, engine.StatusRestored:
			if actual != o.Backup || rec.Current != o.Backup || rec.Provisioning != "" {
				f.t.Errorf("module %s on %s %s but runs %q, records %+v: want restored to its backup %q", module, o.Target, o.Status, actual, rec, o.Backup)
			}
		}
	}
	for _, tg := range targets {
		if seen[tg.Name] != 1 {
			f.t.Errorf("module %s: %s has %d outcomes, want 1", module, tg.Name, seen[tg.Name])
		}
	}
	if len(seen) != len(targets) {
		f.t.Errorf("module %s: outcomes for %v, %d run targets", module, sortedNames(seen), len(targets))
	}
	if res.Failures != failed || w.failures != failed {
		f.t.Errorf("module %s: result counts %d failures, %d outcomes failed, %d recorded", module, res.Failures, failed, w.failures)
	}
}

// Destroy removes a module from the named clusters, as delivery.Destroy does: clusters it
// cannot reach keep it and are named in the warnings. It checks that dependents go first.
func (f *fakeFleet) Destroy(ctx context.Context, req delivery.DestroyRequest) ([]string, error) {
	module := f.moduleOf(req.Spec.Key)
	if ctx.Err() != nil {
		f.t.Errorf("module %s removed after the run was cancelled", module)
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	call := destroyCall{module: module, clusters: slices.Clone(req.Query.Names), keep: req.KeepManagementRecords}
	for _, name := range req.Query.Names {
		c := f.clusters[name]
		if c == nil || c.deleted {
			continue
		}
		if c.unreachable {
			call.warnings = append(call.warnings, fmt.Sprintf("cluster %s: unreachable, keeps module %s", name, module))
			continue
		}
		for _, d := range f.spec.Modules {
			if slices.Contains(d.DependsOn, module) && c.mods[d.Name] != nil {
				f.t.Errorf("module %s removed from %s before module %s, which depends on it", module, name, d.Name)
			}
		}
		delete(c.mods, module)
	}
	f.destroys = append(f.destroys, call)
	f.logf("destroy %s on %v (keep %v): %v", module, req.Query.Names, req.KeepManagementRecords, call.warnings)
	return call.warnings, nil
}

// moduleWorld is the engine's World for one module over the fake clusters.
type moduleWorld struct {
	f      *fakeFleet
	module string
	plan   engine.Plan
	spec   delivery.Spec

	failures int // EventFailed records
}

var errRefused = errors.New("dial tcp: connect: connection refused")

// enter starts a call on target: the fake's lock is held until the returned func.
func (w *moduleWorld) enter(target string) (*fakeCluster, *modState, func()) {
	w.f.mu.Lock()
	c := w.f.clusters[target]
	return c, c.mod(w.module), w.f.mu.Unlock
}

func (w *moduleWorld) Apply(ctx context.Context, target, revision string) error {
	c, st, unlock := w.enter(target)
	defer unlock()
	fs := c.faults[w.module]
	switch {
	case ctx.Err() != nil:
		w.f.t.Errorf("module %s applied to %s after the run was cancelled", w.module, target)
	case w.f.fenced:
		w.f.t.Errorf("module %s applied to %s after the Lease was lost", w.module, target)
	case c.deleted:
		return engine.Mark(engine.ErrTargetGone, errRefused)
	case fs.goneAtApply:
		c.deleted = true
		return engine.Mark(engine.ErrTargetGone, fmt.Errorf("cluster %s: kubeconfig Secret deleted", target))
	}
	st.actual = revision // something may be applied whatever happens next
	if w.spec.Values != nil && revision == w.plan.Desired {
		// What delivery applies with values: what was rendered for this cluster, never the template.
		set, err := w.spec.SetFor(target)
		if err != nil {
			w.f.t.Errorf("module %s applied to %s without its rendering: %v", w.module, target, err)
			return err
		}
		st.rendered = renderedDigest(w.f.t, set)
	}
	switch {
	case fs.applyFails:
		return engine.Mark(engine.ErrRevisionFailed, errors.New(`admission webhook "policy.example.com" denied the request`))
	case fs.cancel:
		w.f.cancel(errors.New("interrupted (Ctrl-C)"))
		return fmt.Errorf("apply: %w", context.Canceled)
	case fs.loseLease:
		w.f.fenced = true
		w.f.cancel(records.ErrLeaseLost)
		return fmt.Errorf("apply: %w", context.Canceled)
	}
	return nil
}

func (w *moduleWorld) Verify(_ context.Context, target, revision string) error {
	c, st, unlock := w.enter(target)
	defer unlock()
	fs := c.faults[w.module]
	switch {
	case c.deleted:
		return engine.Mark(engine.ErrTargetGone, errRefused)
	case revision == w.plan.Desired && fs.lostContact:
		return fmt.Errorf("verify: %w", errRefused)
	case revision == w.plan.Desired && fs.verifyFails:
		return engine.Mark(engine.ErrRevisionFailed, errors.New("Deployment demo/web: not ready within the verify timeout"))
	case st.actual != revision:
		return engine.Mark(engine.ErrRevisionFailed, fmt.Errorf("runs %q, not %q", st.actual, revision))
	}
	// The check Job, as delivery runs it: after the new revision is ready, on the clusters it
	// runs on (the last module delivered there), rendered for the cluster with values.
	if revision != w.plan.Desired {
		return nil
	}
	job, err := w.spec.CheckJob.For(target, w.spec.Values != nil)
	if err != nil || job == nil {
		return err
	}
	c.checkJobs = append(c.checkJobs, w.module+" "+job.GetNamespace())
	if c.checkJobFails {
		return engine.Mark(engine.ErrRevisionFailed, errors.New("check Job "+job.GetNamespace()+"/smoke failed: Failed (BackoffLimitExceeded)"))
	}
	return nil
}

func (w *moduleWorld) Restore(_ context.Context, target, revision string) error {
	c, st, unlock := w.enter(target)
	defer unlock()
	switch {
	case c.deleted:
		return engine.Mark(engine.ErrTargetGone, errRefused)
	case w.f.fenced:
		return fmt.Errorf("restore: %w", records.ErrLeaseLost)
	case c.faults[w.module].lostContact:
		return fmt.Errorf("restore: %w", errRefused)
	}
	st.actual = revision
	return nil
}

// Record keeps the module's records on the cluster by the Event contract (engine.EventKind);
// like delivery's World it writes nothing once the Lease is lost.
func (w *moduleWorld) Record(ctx context.Context, ev engine.Event) error {
	if ev.Target == "" {
		w.f.mu.Lock()
		defer w.f.mu.Unlock()
		if ev.Kind == engine.EventBatchStarted && ev.Phase == engine.PhaseWave && w.failures > w.plan.MaxFailures {
			w.f.t.Errorf("module %s: wave %d started after %d failures, max_failures %d", w.module, ev.Batch, w.failures, w.plan.MaxFailures)
		}
		return nil
	}
	c, st, unlock := w.enter(ev.Target)
	defer unlock()
	if ev.Kind == engine.EventFailed {
		w.failures++
	}
	switch {
	case w.f.fenced:
		return fmt.Errorf("record %s: %w", ev.Kind, records.ErrLeaseLost)
	case ctx.Err() != nil:
		return ctx.Err()
	case c.deleted:
		return engine.Mark(engine.ErrTargetGone, errRefused)
	case c.faults[w.module].recordsDown && ev.Kind == engine.EventProvisioning:
		return apierrors.NewServiceUnavailable("etcdserver: leader changed")
	}
	r := &st.rec
	switch ev.Kind {
	case engine.EventProvisioning:
		r.Provisioning, r.Backup = ev.Revision, ev.Backup
	case engine.EventRollingBack:
		r.Provisioning, r.Backup, r.RollingBack = ev.Revision, ev.Backup, true
	case engine.EventSucceeded:
		r.Current, r.Backup, r.Provisioning, r.RollingBack = ev.Revision, ev.Backup, "", false
	case engine.EventRestored:
		r.Current, r.Backup, r.Provisioning, r.RollingBack = ev.Revision, ev.Revision, "", false
	case engine.EventInvalid:
		r.Invalid[ev.Revision] = ev.Reason
	}
	return nil
}
