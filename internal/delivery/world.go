package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// world is the engine's World for one run of one rollout: targets are workload clusters.
type world struct {
	svc      *Service
	spec     Spec
	progress *progressWriter
	logf     func(string, map[string]any)
	// hold and clusters are what Held judges: the rollout's hold and the clusters as apply
	// read them (their own windows).
	hold     fleet.Hold
	clusters map[string]fleet.Cluster
	// engine is the service's delivery engine's part of this run (port.go).
	engine engineRun
	// moving are the clusters this run moves from the service's previous engine, with the
	// revision that engine holds there (move.go).
	moving map[string]string

	mu        sync.Mutex
	notes     map[string]string            // per cluster: adopted objects given back (see giveBack)
	kept      map[string]map[string]bool   // per cluster: objects prune left in place, and why
	gated     map[string]blame.GateReading // clusters healthy by their gates before the change, as read then (gate.go)
	gateNotes []string                     // what the gates saw and did not judge (gate.go)
	untouched map[string]bool              // clusters of the plan's waves this run has not started yet (gate.go)
}

// pruned keeps what a prune on target left in place (apply.Kept: objects marked
// gradual.dev/prune=disabled, system Namespaces, Namespaces or CRDs still holding objects of
// others), so that the outcome says so; an attempt made again says the same, once.
func (w *world) pruned(target string, res *apply.DeleteResult) {
	if res == nil || len(res.Kept) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kept == nil {
		w.kept = map[string]map[string]bool{}
	}
	if w.kept[target] == nil {
		w.kept[target] = map[string]bool{}
	}
	for _, k := range res.Kept {
		w.kept[target][k.String()] = true
	}
}

// Kept lists, per cluster, what prune left in place and why ("cluster: Kind ns/name: kept: why").
func (w *world) Kept() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, name := range sortedKeys(w.kept) {
		for _, k := range sortedKeys(w.kept[name]) {
			out = append(out, name+": "+k)
		}
	}
	return out
}

// note keeps what giveBack said about target for the outcome (the last word per cluster).
func (w *world) note(target, note string) {
	if note == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.notes == nil {
		w.notes = map[string]string{}
	}
	w.notes[target] = note
}

// Notes lists what the run said about adopted objects, by cluster name.
func (w *world) Notes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, name := range sortedKeys(w.notes) {
		out = append(out, w.notes[name])
	}
	return out
}

var _ engine.World = (*world)(nil)

// applyRetryWindow bounds how long Apply retries infrastructure failures before leaving the
// cluster unsettled, recordRetryWindow the same for a record write; Verify and Restore retry
// within their own timeouts.
const (
	applyRetryWindow  = 2 * time.Minute
	recordRetryWindow = 30 * time.Second
)

// conn connects to target for a direct delivery (direct.go).
func (w *world) conn(ctx context.Context, target string) (*conn, *records.WorkloadStore, error) {
	c, err := w.svc.cluster(ctx, w.spec.ClusterNamespace, target, w.spec.Key, w.spec.ForceConflicts)
	if err != nil {
		return nil, nil, err // classified by the caller's retry: a deleted Secret makes it gone
	}
	return c.ignoring(w.spec.Ignore), records.NewWorkloadStore(c.client, w.spec.RecordNamespace), nil
}

// connRecords is conn with the records target holds of the rollout.
func (w *world) connRecords(ctx context.Context, target string) (*conn, *records.State, error) {
	c, store, err := w.conn(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	state, err := store.Load(ctx, w.spec.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("read records: %w", err)
	}
	return c, state, nil
}

// objectsOf returns the objects of revision on target: the desired ones (rendered for target
// when the rollout has values), or a revision the cluster's records hold (a backup being
// restored).
func (w *world) objectsOf(state *records.State, target, revision string) ([]*unstructured.Unstructured, error) {
	if revision == w.spec.Revision {
		return w.spec.ObjectsFor(target)
	}
	for _, r := range allRecords(state) {
		if r.Revision == revision && len(r.Manifests) > 0 {
			set, err := manifest.FromCanonical(r.Manifests)
			if err != nil {
				return nil, fmt.Errorf("revision %s in the records: %w", revision, err)
			}
			return set.Objects, nil
		}
	}
	return nil, fmt.Errorf("revision %s: no record of it on this cluster to restore from", revision)
}

// Apply applies the desired revision and prunes what the revisions it replaces had and it has not.
func (w *world) Apply(ctx context.Context, target, revision string) error {
	rctx, cancel := w.svc.clock.WithTimeout(ctx, applyRetryWindow)
	defer cancel()
	err := w.retry(rctx, target, func(ctx context.Context) error { return w.engine.apply(ctx, target, revision) })
	return w.moveError(target, err)
}

// apply is one attempt of Apply, delivering directly. Every step is idempotent, so an attempt
// cut short by an infrastructure failure is simply made again.
func (r directRun) apply(ctx context.Context, target, revision string) error {
	w := r.w
	c, state, err := w.connRecords(ctx, target)
	if err != nil {
		return err
	}
	objs, err := w.objectsOf(state, target, revision)
	if err != nil {
		return err
	}
	if err := c.applier.Check(ctx, objs); err != nil {
		return err
	}
	if _, err := c.applier.Apply(ctx, objs); err != nil {
		return err
	}
	// Objects the new revision drops: deleted when the rollout made them, given back (as they
	// are now) when it adopted them.
	adopted, err := w.prune(ctx, c, target, state, revision, objs)
	if err != nil {
		return err
	}
	note, err := giveBack(ctx, c.applier, target, dropped(adopted, objs), never)
	w.note(target, note)
	return err
}

// dropped is the adopted objects that objs does not hold.
func dropped(adopted []records.Adopted, objs []*unstructured.Unstructured) []records.Adopted {
	inv := apply.InventoryOf(objs)
	return slices.DeleteFunc(adopted, func(a records.Adopted) bool { return inv.Contains(a.Object) })
}

// Verify waits until every object of revision is ready, then runs the HTTP checks. ctx carries
// the verify timeout.
func (w *world) Verify(ctx context.Context, target, revision string) error {
	if revision == "" {
		return nil // nothing installed: Restore already deleted and waited
	}
	if prev, ok := w.movingTo(target); ok && revision == prev {
		return nil // left to the previous engine, which was never touched (move.go)
	}
	err := w.engine.verify(ctx, target, revision)
	if err != nil || revision != w.spec.Revision {
		return w.moveError(target, err)
	}
	return w.moveError(target, w.gateAfter(ctx, target))
}

// verify is Verify delivering directly: attempts made again while the infrastructure fails.
func (r directRun) verify(ctx context.Context, target, revision string) error {
	return r.w.retry(ctx, target, func(ctx context.Context) error { return r.verifyOnce(ctx, target, revision) })
}

// verifyOnce is one attempt of verify.
func (r directRun) verifyOnce(ctx context.Context, target, revision string) error {
	w := r.w
	c, store, err := w.conn(ctx, target)
	if err != nil {
		return err
	}
	var state *records.State
	if revision != w.spec.Revision {
		if state, err = store.Load(ctx, w.spec.Key); err != nil {
			return fmt.Errorf("read records: %w", err)
		}
	}
	objs, err := w.objectsOf(state, target, revision)
	if err != nil {
		return err
	}
	if revision == w.spec.Revision {
		c = c.judging(w.spec.Health)
	}
	if err := c.applier.Wait(ctx, objs, 0); err != nil {
		return err
	}
	if revision != w.spec.Revision {
		return nil
	}
	if err := runHTTPChecks(ctx, target, w.spec.HTTPChecks, checkLogger{w.logf}); err != nil {
		return err
	}
	job, err := w.spec.CheckJob.For(target, w.spec.Values != nil)
	if err != nil || job == nil {
		return err
	}
	run := *w.spec.CheckJob
	run.Job = job
	return runCheckJob(ctx, c.client, target, &run, func(msg string) { w.logf(msg, map[string]any{"cluster": target}) })
}

// Restore returns target to revision: its objects re-applied and what newer revisions added
// deleted. Restoring to "" deletes everything the rollout applied.
func (w *world) Restore(ctx context.Context, target, revision string) error {
	if prev, ok := w.movingTo(target); ok && revision == prev {
		// Back to the previous engine: the new one lets go without pruning (move.go).
		return w.retry(ctx, target, func(ctx context.Context) error { return w.letGoNew(ctx, target) })
	}
	return w.retry(ctx, target, func(ctx context.Context) error { return w.engine.restore(ctx, target, revision) })
}

// restore is one attempt of Restore, delivering directly.
func (r directRun) restore(ctx context.Context, target, revision string) error {
	w := r.w
	c, state, err := w.connRecords(ctx, target)
	if err != nil {
		return err
	}
	if revision == "" {
		// Back to nothing: what the rollout made goes; what it adopted stays, put back as it
		// was before the rollout when its content was saved (no good revision ever ran here,
		// so nothing the rollout wrote to it may remain).
		made, adopted := splitAdopted(previousInventory(state, ""), state.AdoptedOf())
		res, err := c.applier.Delete(ctx, made)
		if err != nil {
			return err
		}
		if err := c.applier.WaitDeleted(ctx, res.Deleted); err != nil {
			return err
		}
		note, err := giveBack(ctx, c.applier, target, adopted, always)
		w.note(target, note)
		return err
	}
	objs, err := w.objectsOf(state, target, revision)
	if err != nil {
		return err
	}
	// What the undone revision added goes first, then the backup is applied again: a revision
	// that broke the cluster's admission (a fail-closed webhook configuration whose service is
	// not there) would refuse the re-apply, while deleting a webhook configuration is never
	// subject to admission webhooks. Objects only the undone revision had are no part of the
	// backup, so deleting them first costs the backup nothing.
	adopted, err := w.prune(ctx, c, target, state, revision, objs)
	if err != nil {
		return err
	}
	if _, err := c.applier.Apply(ctx, objs); err != nil {
		return err
	}
	// Adopted objects the restored revision does not hold are given back: put back as they
	// were when the revision being undone adopted them, left as they are when the restored
	// revision had adopted them already (their saved content predates it).
	note, err := giveBack(ctx, c.applier, target, dropped(adopted, objs), adoptedSince(state, revision))
	w.note(target, note)
	return err
}

// prune deletes from target the objects the rollout made that the records of state say may be
// there besides revision (previousInventory) and objs does not hold; it returns the objects the
// rollout adopted among them, which the caller gives back.
func (w *world) prune(ctx context.Context, c *conn, target string, state *records.State, revision string, objs []*unstructured.Unstructured) ([]records.Adopted, error) {
	made, adopted := splitAdopted(previousInventory(state, revision), state.AdoptedOf())
	pruned, err := c.applier.Prune(ctx, made, objs)
	w.pruned(target, pruned)
	return adopted, err
}

// previousInventory is every object the rollout's records on a cluster say may be there, other
// than revision's own record: what a change to revision must consider pruning.
func previousInventory(state *records.State, revision string) apply.Inventory {
	seen := map[manifest.Identity]bool{}
	var inv apply.Inventory
	for _, r := range allRecords(state) {
		if r.Revision == revision && revision != "" {
			continue
		}
		if r.State == records.StateInvalid && r.Revision != "" && !inFlight(state, r.Revision) {
			continue // a failed revision's objects were removed by its restore
		}
		for _, ref := range r.Inventory {
			if !seen[ref.Identity()] {
				seen[ref.Identity()] = true
				inv = append(inv, ref)
			}
		}
	}
	return inv
}

// allRecords lists every record a cluster holds of one rollout.
func allRecords(state *records.State) []records.Revision {
	var out []records.Revision
	for _, r := range []*records.Revision{state.Current, state.Backup, state.Provisioning} {
		if r != nil {
			out = append(out, *r)
		}
	}
	out = append(out, state.Invalid...)
	return append(out, state.Superseded...)
}

func inFlight(state *records.State, revision string) bool {
	return state.Provisioning != nil && state.Provisioning.Revision == revision
}

// Record keeps the records in step with the engine's events (see engine.EventKind).
func (w *world) Record(ctx context.Context, ev engine.Event) error {
	w.progress.observe(ctx, ev)
	if ev.Kind == engine.EventBatchStarted {
		w.touch(ev.Targets)
	}
	if ev.Kind == engine.EventBatchStarted {
		w.engine.batch(ev.Targets)
	}
	if ev.Target == "" {
		w.logRun(ev)
		w.event(ctx, ev)
		return nil
	}
	switch ev.Kind {
	case engine.EventFailed, engine.EventRestoreFailed, engine.EventUnsettled, engine.EventGone:
		return nil // the progress record has them; the cluster's records do not change
	case engine.EventProvisioning:
		w.engine.changing(ev.Target)
	case engine.EventInvalid:
		return w.engine.recordInvalid(ctx, ev)
	case engine.EventRestored:
		if prev, ok := w.movingTo(ev.Target); ok && ev.Revision == prev {
			return nil // the new engine let go, its records with it; the previous engine's hold the revision
		}
	}
	rctx, cancel := w.svc.clock.WithTimeout(ctx, recordRetryWindow)
	defer cancel()
	return w.retry(rctx, ev.Target, func(ctx context.Context) error { return w.engine.record(ctx, ev) })
}

// recordLedger writes ev's failure to the management cluster's ledger (one attempt).
func (w *world) recordLedger(ctx context.Context, ev engine.Event) error {
	return w.svc.managementStore(w.spec.RecordNamespace).RecordInvalid(ctx, w.spec.Key, records.InvalidEntry{
		Revision: ev.Revision, Reason: ev.Reason, Clusters: []string{ev.Target}, RecordedAt: ev.At,
	})
}

// recordInvalid records a revision's failure on a cluster (delivering directly): first in the
// cluster's own records, which answered a moment ago (they are what the next plan reads the
// verdict from when the ledger lacks it: withClusterFailures), on a context of its own that
// neither a cancelled run nor a lost Lease cuts short (records.Unfenced); then in the
// management cluster's ledger, fenced like every other write. The error says what was not
// written: the engine halts rather than take a revision further that the ledger does not hold.
func (r directRun) recordInvalid(ctx context.Context, ev engine.Event) error {
	w := r.w
	// Outlives cancellation (and the Lease): the next plan must read the verdict from the cluster.
	vctx, cancel := w.svc.clock.WithTimeout(records.Unfenced(context.WithoutCancel(ctx)), recordRetryWindow)
	defer cancel()
	werr := w.retry(vctx, ev.Target, func(ctx context.Context) error {
		_, store, err := w.conn(ctx, ev.Target)
		if err != nil {
			return err
		}
		// When it was seen goes with it: until the ledger holds the entry (with its time), the
		// cluster's record is what the next plan shows.
		return store.MarkInvalid(ctx, w.spec.Key, ev.Revision, ev.Reason+" (seen "+ev.At.UTC().Format(time.RFC3339)+")")
	})
	rctx, cancel2 := w.svc.clock.WithTimeout(ctx, recordRetryWindow)
	defer cancel2()
	lerr := w.retry(rctx, ev.Target, func(ctx context.Context) error { return w.recordLedger(ctx, ev) })
	switch {
	case lerr != nil && werr != nil:
		return fmt.Errorf("record the ledger entry: %w; and the cluster's own records: %v", lerr, werr)
	case lerr != nil:
		return fmt.Errorf("record the ledger entry (the cluster's own records hold the failure, and the next plan refuses it): %w", lerr)
	}
	return werr
}

// record is one attempt of Record for a target event, delivering directly: the cluster's records
// are in the cluster. Each store transition is idempotent.
func (r directRun) record(ctx context.Context, ev engine.Event) error {
	w, key := r.w, r.w.spec.Key
	c, store, err := w.conn(ctx, ev.Target)
	if err != nil {
		return err
	}
	if ev.Kind == engine.EventProvisioning {
		return r.provisioning(ctx, c, store, ev)
	}
	return recordTransition(ctx, store, key, ev)
}

// recordTransition writes what every engine records of a cluster the same way: a revision that
// succeeded, a rollback begun, a restore done (in store, under key: the cluster's own records
// delivering directly, the management cluster's through Flux).
func recordTransition(ctx context.Context, store *records.WorkloadStore, key records.Key, ev engine.Event) error {
	switch ev.Kind {
	case engine.EventSucceeded:
		return store.MarkCurrent(ctx, key, ev.Revision)
	case engine.EventRollingBack:
		return store.MarkRollingBack(ctx, key, ev.Revision)
	case engine.EventRestored:
		_, err := store.Restored(ctx, key)
		return err
	}
	return nil // failed, restore-failed, unsettled, gone: the progress record has them
}

// desired is the desired revision's objects for target, and their canonical form for its record.
func (w *world) desired(target string) (*manifest.Set, []byte, error) {
	set, err := w.spec.SetFor(target)
	if err != nil {
		return nil, nil, err
	}
	canonical, err := set.Canonical()
	return set, canonical, err
}

// provisioning records that ev's revision is about to be applied to the cluster: its objects,
// and which of them exist already (adopted), read before anything is applied, since once
// applied our field manager is on them too and who made them is harder to tell.
func (r directRun) provisioning(ctx context.Context, c *conn, store *records.WorkloadStore, ev engine.Event) error {
	w, key := r.w, r.w.spec.Key
	set, desired, err := w.desired(ev.Target)
	if err != nil {
		return err
	}
	state, err := store.Load(ctx, key)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	adopted, claims, unrecorded, bridged, err := adoptions(ctx, c, ev.Target, state, set.Objects, w.spec.AdoptUnrecorded)
	if err != nil {
		return err
	}
	if _, moving := w.movingTo(ev.Target); moving {
		// What is there is what the engine the rollout moves from delivered of this same
		// content (move.go): the rollout's own, neither someone else's to adopt nor objects
		// whose records are lost.
		adopted, unrecorded = nil, nil
	}
	if len(claims) > 0 {
		// Another rollout or module assignment applied them since the run's check (or this
		// cluster could not be read then): nothing is applied here.
		return engine.Mark(engine.ErrChangeRefused, ClaimsError(dedupeClaims(claims), key.Describe()))
	}
	if len(unrecorded) > 0 {
		// Its records went since the run read them (unrecorded.go): what runs there is
		// unknown, and the provisioning record written now would make a failing revision's
		// restore delete what ran before. Nothing is written or applied: the cluster is left
		// unsettled, which counts against max_unsettled, for the next plan to show.
		return engine.Mark(engine.ErrChangeRefused, errors.New(RecordsMissingReason(unrecorded)))
	}
	if err := store.MarkProvisioning(ctx, key, records.Revision{
		Revision:  ev.Revision,
		Manifests: desired,
		Inventory: inventoryOf(set.Objects),
		Adopted:   adopted,
	}); err != nil {
		return err
	}
	// What the key's bridge gave a joiner is the key's from now on (its inventory says so):
	// its fields pass to the key's field manager, so that the apply, which leaves matching
	// objects alone, and later prunes and deletes treat them as the key's own.
	return c.applier.TakeOver(ctx, bridged)
}

func (w *world) logRun(ev engine.Event) {
	fields := map[string]any{"rollout": w.spec.Key.String(), "revision": w.spec.Revision}
	switch ev.Kind {
	case engine.EventBatchStarted:
		fields["clusters"] = ev.Targets
		w.logf(fmt.Sprintf("%s %d/%d started: %v", ev.Phase, ev.Batch, ev.Batches, ev.Targets), fields)
	case engine.EventBatchDone:
		summary := w.progress.summary(ev.Targets)
		fields["outcomes"] = summary
		w.logf(fmt.Sprintf("%s %d/%d done: %s", ev.Phase, ev.Batch, ev.Batches, summary), fields)
	case engine.EventRunStarted, engine.EventRunFinished:
		w.logf(fmt.Sprintf("rollout %s: %s %s", w.spec.Key, ev.Kind, ev.Reason), fields)
	}
}

// event writes a Kubernetes Event on the management record when a wave starts and when it is
// done (Run writes the run's end), for whoever follows the run with `kubectl get events -w`.
func (w *world) event(ctx context.Context, ev engine.Event) {
	if ev.Phase != engine.PhaseWave {
		return
	}
	var reason, msg string
	warning := false
	switch ev.Kind {
	case engine.EventBatchStarted:
		reason = records.EventReasonWaveStarted
		msg = fmt.Sprintf("Wave %d/%d of revision %s started: %s", ev.Batch, ev.Batches, w.spec.Revision, shortNames(ev.Targets))
	case engine.EventBatchDone:
		reason = records.EventReasonWaveDone
		summary := w.progress.summary(ev.Targets)
		warning = !allSucceeded(summary)
		msg = fmt.Sprintf("Wave %d/%d of revision %s done: %s", ev.Batch, ev.Batches, w.spec.Revision, summary)
	default:
		return
	}
	if err := w.svc.managementStore(w.spec.RecordNamespace).Event(ctx, w.spec.Key, warning, reason, msg); err != nil {
		w.logf("event not written: "+err.Error(), map[string]any{"rollout": w.spec.Key.String(), "reason": reason})
	}
}

// allSucceeded reports whether a batch summary ("a succeeded, b failed") names only successes.
func allSucceeded(summary string) bool {
	for part := range strings.SplitSeq(summary, ", ") {
		if part != "" && !strings.HasSuffix(part, " "+string(engine.EventSucceeded)) {
			return false
		}
	}
	return true
}

// shortNames lists up to ten names, then how many more: an Event's message is bounded.
func shortNames(names []string) string {
	const shown = 10
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func inventoryOf(objs []*unstructured.Unstructured) []records.ObjectRef {
	return apply.InventoryOf(objs)
}
