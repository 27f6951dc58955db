package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// fluxEngine is the Flux delivery engine (port.go). Everything that decides stays as delivering
// directly (the engine's waves, canary, budget and bake, the ledger, the progress record, the
// Lease): only what changes and reads a cluster goes through Flux (internal/fluxdelivery), and
// the per-cluster records move from the workload clusters to the management cluster, since the
// runner may not reach the workloads. It reads and writes the management cluster and the
// registry only: no workload cluster, no kubeconfig Secret.
type fluxEngine struct{ settings fluxdelivery.Settings }

var _ deliveryEngine = fluxEngine{}

func (fluxEngine) discover(s *Service, ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
	q.WithoutSecrets = true // only kustomize-controller reads the Clusters' Secrets
	return s.discover(ctx, q)
}

func (fluxEngine) goneReason(s *Service, ctx context.Context, namespace, name string) (string, error) {
	return s.goneReason(ctx, namespace, name, true) // judged by the Cluster alone
}

// markUnrecorded marks nothing here: the reader reads a cluster whose records in the management
// cluster are gone while its Kustomization is still there as records-missing (fluxUnrecorded),
// from what it read anyway.
func (fluxEngine) markUnrecorded(*Service, context.Context, string, records.Key, *Observation, bool,
	func(string) ([]*unstructured.Unstructured, error)) {
}

// drifted is none: Flux repairs drift between applies; the plan no longer needs to.
func (fluxEngine) drifted(*Service, context.Context, Spec, []engine.Target) map[string]bool {
	return nil
}

// ownership reads the claims on spec's objects from the inventories of the other Flux
// Kustomizations that apply to the clusters (fluxClaims), asking no workload cluster; it adopts
// nothing: Flux applies and prunes by its own inventory, and what it must never prune carries
// Flux's opt-out (fluxdelivery.Manifests).
func (fluxEngine) ownership(s *Service, ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool, withClaims, _ bool) ([]Claim, []Found, error) {
	if !withClaims {
		return nil, nil, nil
	}
	claims, err := fluxClaims(s, ctx, spec, clusters, ignore)
	return claims, nil, err
}

// checkOwners refuses, before anything is pinned, objects of spec that another Kustomization
// applied to clusters since the plan.
func (fluxEngine) checkOwners(s *Service, ctx context.Context, spec Spec, clusters []string) error {
	claims, err := fluxClaims(s, ctx, spec, clusters, nil)
	if err != nil || len(claims) == 0 {
		return err
	}
	return ClaimsError(claims, spec.Key.Describe())
}

// fluxClaims are the objects of spec that another Flux Kustomization (another rollout's or
// module's, in any record namespace, or anyone's) has applied to one of clusters: two
// Kustomizations of one object overwrite each other and each prunes it when it drops it. A
// cluster whose objects cannot be rendered is left to the plan's own refusal.
func fluxClaims(s *Service, ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool) ([]Claim, error) {
	holders, err := fluxdelivery.Holders(ctx, s.mgmt.Client, spec.ClusterNamespace, spec.Key, clusters)
	if err != nil {
		return nil, managementUnread(len(clusters), err)
	}
	var claims []Claim
	for _, name := range sortedKeys(holders) {
		objs, err := spec.ObjectsFor(name)
		if err != nil {
			continue
		}
		for _, o := range objs {
			h, ok := holders[name][manifest.IdentityOf(o)]
			if !ok || h.Key != (records.Key{}) && ignore != nil && ignore(h.Key) {
				continue
			}
			c := Claim{Cluster: name, Object: manifest.RefOf(o).String(), Owner: h.Key}
			if h.Key == (records.Key{}) {
				c.Kustomization = h.Kustomization
			}
			claims = append(claims, c)
		}
	}
	return dedupeClaims(claims), nil
}

// preview asks no workload cluster at plan time: kustomize-controller's dry-run refuses at apply.
func (fluxEngine) preview(_ *Service, _ context.Context, _ Spec, _, _ []string, out *Preview) (*Preview, error) {
	if out != nil {
		out.Clusters = nil
		out.Skipped = "delivery through Flux asks no workload cluster at plan time (kustomize-controller's dry-run refuses at apply)"
	}
	return out, nil
}

// run pins the desired revision with verify.health_checks as the Kustomizations'
// healthCheckExprs, so that kustomize-controller judges its objects by them as the provider
// does when delivering directly (internal/health, the same CEL environment), and a revision
// restored from the records without them: judged by kstatus alone, as a direct restore is.
func (e fluxEngine) run(w *world) engineRun {
	desired := w.spec.Kustomize
	desired.HealthChecks = w.spec.Health.Rules()
	restored := w.spec.Kustomize
	restored.HealthChecks = nil
	return &fluxRun{w: w, settings: e.settings,
		d:        fluxdelivery.New(w.svc.mgmt.Client, e.settings, w.spec.Key).WithKustomize(desired),
		restored: fluxdelivery.New(w.svc.mgmt.Client, e.settings, w.spec.Key).WithKustomize(restored)}
}

// reader reads the Flux objects and records of every cluster at once (fluxReads); per cluster,
// only a rollout with values reads the current record's objects, to compare them with the
// cluster's rendering.
func (e fluxEngine) reader(s *Service, ctx context.Context, namespace string, key records.Key, recordNamespace string, clusters []string) (clusterReader, error) {
	flux, err := s.fluxReads(ctx, e.settings, namespace, key, recordNamespace, clusters)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, name string, _ apply.Ignore, drift, rendered bool) (engine.TargetRecord, ClusterState, error) {
		skip, fluxDrift := flux.view(key, namespace, name, drift)
		if skip != "" {
			return engine.TargetRecord{}, ClusterState{}, skipError(skip)
		}
		store, rkey := s.fluxStore(recordNamespace), FluxRecordKey(key, name)
		state, err := flux.summary(rkey)
		if err == nil && drift && rendered && state.Current != nil {
			state, err = store.LoadCurrent(ctx, rkey)
		}
		if err != nil {
			return engine.TargetRecord{}, ClusterState{}, fmt.Errorf("read records: %w", err)
		}
		rec, st := clusterStateOf(state)
		if holdsNothing(state) && flux.objects.Status(name).Exists {
			st.State = StateRecordsMissing
			st.Drift, err = e.fluxUnrecorded(s, ctx, namespace, key, name)
			return rec, st, err
		}
		if drift && st.State == StateCurrent {
			st.recorded = state.Current.Manifests // what the cluster got, for values-changed
			if fluxDrift != "" {
				st.State, st.Drift = StateDrifted, []string{fluxDrift}
			}
		}
		return rec, st, nil
	}, nil
}

// fluxUnrecorded is what the rollout's Kustomization on cluster applied (its inventory), read
// when the cluster's records hold nothing of the rollout but the Kustomization is there: the
// records were deleted from the management cluster (a cleanup of its record namespace) while Flux
// keeps applying a revision. Read as pending, the cluster would take the next revision, and a
// failure there would be restored to nothing: its Kustomization deleted, and Flux prunes what ran
// before. So it is records-missing (unrecorded.go): held back until adopt = true.
func (e fluxEngine) fluxUnrecorded(s *Service, ctx context.Context, namespace string, key records.Key, cluster string) ([]string, error) {
	found, err := fluxdelivery.New(s.mgmt.Client, e.settings, key).Inventory(ctx, namespace, cluster)
	if err != nil {
		return nil, fmt.Errorf("read its Kustomization's inventory: %w", err)
	}
	return found, nil
}

// fluxPoll is how often the Flux engine reads a Kustomization while it waits, at first. A
// verification backs off from it to fluxPollMax (fluxBackoff): kustomize-controller takes seconds
// to fetch, build, apply and wait, and a wave of many clusters polled every half second spent
// most of the provider's CPU on those reads (make bench, 64 Clusters through Flux: about 32,000
// reads in a 250 s wave).
const (
	fluxPoll    = 500 * time.Millisecond
	fluxPollMax = 3 * time.Second
)

// fluxBackoff is the wait before the next read of a Kustomization after waiting d.
func fluxBackoff(d time.Duration) time.Duration { return min(d*3/2, fluxPollMax) }

// fieldManager is kustomize-controller's, which applies every Kustomization's objects.
func (fluxEngine) fieldManager(records.Key) string { return fluxdelivery.ControllerFieldManager }

// inherit does nothing: kustomize-controller takes the fields it applies over by itself (it
// applies with forced ownership), and the direct engine gave its own away as it let go (orphan).
func (fluxEngine) inherit(*Service, context.Context, Spec, string, string) error { return nil }

// WithFlux returns the service delivering through Flux with settings; nil settings return s
// (direct). The copy shares s's clients.
func (s *Service) WithFlux(settings *fluxdelivery.Settings) *Service {
	if settings == nil {
		return s
	}
	out := *s
	out.engine = fluxEngine{settings: *settings}
	return &out
}

// ready refuses, in the person's words, what makes delivery through Flux impossible before
// anything is written: a management cluster without Flux's CRDs, a registry that cannot be
// reached or refuses a push.
func (e fluxEngine) ready(s *Service, ctx context.Context) error {
	if err := s.fluxInstalled(); err != nil {
		return err
	}
	if err := e.settings.CheckPush(ctx); err != nil {
		return usererr.Wrap(err, "Registry Not Usable",
			"delivery.flux publishes each revision to "+e.settings.Repository+"; this process must be able to push there. Nothing was written.")
	}
	return nil
}

// fluxInstalled refuses, in the person's words, a management cluster that lacks Flux's CRDs.
func (s *Service) fluxInstalled() error {
	if err := fluxdelivery.Installed(s.mgmt.Client); err != nil {
		return usererr.Wrap(err, "Flux Not Installed",
			"delivery.flux needs Flux's source-controller and kustomize-controller (their OCIRepository and Kustomization kinds) in the management cluster.")
	}
	return nil
}

// FluxRecordKey is the key of key's records of cluster in the management cluster: the records
// of every cluster live side by side there, told apart by the cluster in the key.
func FluxRecordKey(key records.Key, cluster string) records.Key {
	return records.Key{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name + "@" + cluster}
}

// fluxStore is where the Flux engine keeps the per-cluster records: the management cluster.
func (s *Service) fluxStore(recordNamespace string) *records.WorkloadStore {
	return records.NewWorkloadStore(s.mgmt.Client, recordNamespace)
}

// fluxRun is the Flux engine's part of one run.
type fluxRun struct {
	w *world
	// settings seal the sensitive objects (Spec.fluxSealed).
	settings fluxdelivery.Settings
	// d pins the desired revision (with the health checks); restored pins the others.
	d, restored *fluxdelivery.Delivery
	// statuses follows the rollout's Kustomizations for the run's verifications (nil: each
	// verification reads its own).
	statuses *fluxdelivery.Statuses
	// desired is the desired revision's artifact without values, the same for every cluster:
	// made once per run (its YAML was a fifth of the provider's CPU in a wave of 64 when made
	// for each cluster's pin and again for its verification).
	// requests counts the reconciles this run asked for (confirm), to make each token unique.
	requests atomic.Int64
	// generations are, by target, the Kustomization's generation this run's last pin wrote
	// (int64): a status about an older one is not about that pin.
	generations sync.Map
	desired     struct {
		once      sync.Once
		manifests []byte
		err       error
	}
}

// start watches the rollout's Kustomizations for the run's verifications (no watch when the
// service was given a client only, as unit tests do: each verification reads).
func (r *fluxRun) start(ctx context.Context) func() {
	stop := func() {}
	if r.w.svc.mgmt.RESTConfig != nil {
		if c, err := fluxdelivery.NewStatusClient(r.w.svc.mgmt.RESTConfig); err == nil {
			var watchCtx context.Context
			watchCtx, stop = context.WithCancel(ctx)
			r.statuses = r.d.WatchStatuses(watchCtx, c, r.w.spec.ClusterNamespace)
		}
	}
	return func() {
		stop()
		r.sweep(ctx)
	}
}

// sweep deletes, at the end of a run, the OCIRepositories of the rollout's artifacts that no
// Kustomization names any more (the revision every cluster moved off, a rendering a restore
// replaced). Best effort, within sweepTimeout and without waiting for source-controller to let
// them go: one left behind (the management cluster unreachable, the run cancelled) serves
// nothing, and the next run's sweep, or a removal's, deletes it.
func (r *fluxRun) sweep(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	ctx, cancel := r.w.svc.clock.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	_ = r.d.Sweep(ctx, r.w.spec.ClusterNamespace, 0)
}

// sweepTimeout bounds the sweep at the end of a run: two lists and a delete or two.
const sweepTimeout = 30 * time.Second

// batch focuses the watch on the batch's clusters: only they change until it is done.
func (r *fluxRun) batch(targets []string) {
	if r.statuses != nil {
		r.statuses.Focus(targets)
	}
}

// changing does nothing: kustomize-controller reads the cluster's kubeconfig Secret, not this
// process.
func (r *fluxRun) changing(string) {}

// readGate reads the Cluster's Available condition only: the runner reaches no workload cluster.
func (r *fluxRun) readGate(ctx context.Context, target string) (blame.GateReading, error) {
	return r.w.svc.gate(ctx, r.w.spec.ClusterNamespace, target, false)
}

// held leaves a cluster alone whose Kustomization is suspended (fluxSuspended).
func (r *fluxRun) held(target string) string {
	// A context of its own (the engine's hook passes none): a cancelled run waits at most the bound.
	ctx, cancel := context.WithTimeout(context.Background(), heldReadTimeout)
	defer cancel()
	// A read that fails holds nothing back: the pin that follows meets the same management
	// cluster and fails (an infrastructure failure) if it is still unreachable.
	reason, _ := r.w.svc.fluxSuspended(ctx, r.d, r.w.spec.ClusterNamespace, target)
	return reason
}

// fluxArtifact is the artifact of revision on target: its tag and its objects as YAML. The
// desired revision is the same for every cluster: one artifact, tagged revision, made once per
// run (with values, the template each cluster's Kustomization renders: fluxPin). A revision
// restored from a cluster's records (rendered as that cluster got it) is an artifact of its own,
// tagged revision-<content hash>, so that clusters rendered alike share one and no cluster is
// given another's rendering.
func (r *fluxRun) fluxArtifact(ctx context.Context, target, revision string) (tag string, manifests []byte, err error) {
	if revision == r.w.spec.Revision {
		d := &r.desired
		d.once.Do(func() { _, d.manifests, d.err = r.makeArtifact(ctx, target, revision) })
		return revision, d.manifests, d.err
	}
	return r.makeArtifact(ctx, target, revision)
}

// makeArtifact is fluxArtifact, made.
func (r *fluxRun) makeArtifact(ctx context.Context, target, revision string) (tag string, manifests []byte, err error) {
	w := r.w
	if revision == w.spec.Revision {
		// The bundle as given (with values, the template each Kustomization renders), and the
		// desired revision's check Job; a restored one is not checked, as delivering directly.
		objs, err := w.spec.fluxObjects(r.settings, w.spec.Objects.Objects, target)
		if err != nil {
			return "", nil, err
		}
		manifests, err = fluxdelivery.Manifests(objs)
		return revision, manifests, err
	}
	state, err := w.svc.fluxStore(w.spec.RecordNamespace).Load(ctx, FluxRecordKey(w.spec.Key, target))
	if err != nil {
		return "", nil, fmt.Errorf("read records: %w", err)
	}
	objs, err := w.objectsOf(state, target, revision)
	if err != nil {
		return "", nil, err
	}
	if manifests, err = fluxdelivery.Manifests(objs); err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(manifests)
	return revision + "-" + hex.EncodeToString(sum[:])[:12], manifests, nil
}

// sealedDesired is the canonical form of the desired revision's objects for target as the
// artifact holds them, its sensitive objects encrypted: what the management cluster's record
// keeps, so that a restore republishes the ciphertext and no plaintext is stored there.
func (r *fluxRun) sealedDesired(target string) ([]byte, error) {
	set, _, err := r.w.desired(target)
	if err != nil {
		return nil, err
	}
	sealed, err := r.w.spec.fluxSealed(r.settings, set.Objects)
	if err != nil {
		return nil, err
	}
	return (&manifest.Set{Objects: sealed}).Canonical()
}

// apply is one attempt of Apply through Flux: fluxPin.
func (r *fluxRun) apply(ctx context.Context, target, revision string) error {
	return r.fluxPin(ctx, target, revision)
}

// fluxPin publishes target's artifact of revision (the desired one, or one the cluster's records
// hold) and pins the cluster's Kustomization to it.
func (r *fluxRun) fluxPin(ctx context.Context, target, revision string) error {
	tag, manifests, err := r.fluxArtifact(ctx, target, revision)
	if err != nil {
		return err
	}
	digest, err := r.d.Publish(ctx, tag, manifests)
	if errors.Is(err, fluxdelivery.ErrTagHoldsOther) {
		// Someone else's content under the revision's tag: nothing is pinned, and retrying will
		// not change it; it says nothing about the revision's health either.
		return engine.Mark(engine.ErrChangeRefused, err)
	}
	if err != nil {
		return err // an infrastructure failure: the registry, never the revision
	}
	d, p := r.d, fluxdelivery.Pinning{Digest: digest, Timeout: r.w.spec.Policy.VerifyTimeout}
	switch {
	case revision != r.w.spec.Revision:
		d = r.restored // a rendering the records hold: applied as it is
	case r.w.spec.Values != nil:
		// The artifact is the template: the cluster's Kustomization substitutes its variables.
		if p.Substitute = r.w.spec.Variables[target]; p.Substitute == nil {
			return fmt.Errorf("the manifests were not rendered for cluster %s (it was not eligible when the fleet was read); the next plan renders it", target)
		}
	}
	return r.pin(ctx, d, target, p)
}

// pin pins target through d and keeps the Kustomization's generation it wrote, which the
// verifications that follow wait for (waitOn).
func (r *fluxRun) pin(ctx context.Context, d *fluxdelivery.Delivery, target string, p fluxdelivery.Pinning) error {
	generation, err := d.Pin(ctx, r.w.spec.ClusterNamespace, target, p)
	if err != nil {
		return err
	}
	r.generations.Store(target, generation)
	return nil
}

// verify waits, within ctx, for the cluster's Kustomization to have target's artifact of
// revision applied and ready, and classifies what it says otherwise. The desired revision, when
// it brings admission configuration, must also pass one more reconcile (confirm).
func (r *fluxRun) verify(ctx context.Context, target, revision string) error {
	tag, manifests, err := r.fluxArtifact(ctx, target, revision)
	if err != nil {
		return err
	}
	// The digest pinned: the planned content's, computed, never read from the tag.
	digest, err := r.d.Digest(tag, manifests)
	if err != nil {
		return err
	}
	if err := r.waitOn(ctx, target, digest, ""); err != nil {
		return err
	}
	if revision != r.w.spec.Revision || !r.bringsAdmission(target) {
		return nil
	}
	return r.confirm(ctx, target, digest)
}

// waitOn waits, within ctx, for target's Kustomization to have digest applied and ready (after
// handling the reconcile request token, when not ""), and classifies what it says otherwise.
func (r *fluxRun) waitOn(ctx context.Context, target, digest, token string) error {
	var last fluxdelivery.Status
	for poll := fluxPoll; ; poll = fluxBackoff(poll) {
		st, changed, err := r.fluxStatus(ctx, target)
		if pinned, ok := r.generations.Load(target); ok {
			if generation, ok := pinned.(int64); ok {
				st = st.AsOf(generation)
			}
		}
		if err == nil && (token == "" || st.Handled == token) {
			last = st
			if err := fluxdelivery.Classify(st, digest, false); err != nil {
				return fluxMark(err)
			}
			if st.On(digest) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err != nil && !last.Exists {
				return fmt.Errorf("read the Kustomization of %s: %w", target, err)
			}
			return fluxMark(fluxdelivery.Classify(last, digest, true))
		case <-changed:
		case <-time.After(poll):
		}
	}
}

// bringsAdmission says whether the desired revision holds admission configuration on target
// (fluxdelivery/admission.go).
func (r *fluxRun) bringsAdmission(target string) bool {
	set, _, err := r.w.desired(target)
	return err == nil && fluxdelivery.HoldsAdmission(set.Objects)
}

// confirm asks kustomize-controller for one more reconcile of target's Kustomization, ready on
// digest, and waits within ctx for its verdict: the first reconcile dry-ran the revision's
// objects before its admission configuration existed, this one passes them through it. A
// fail-closed webhook the revision brought, whose service is not there, fails it: the API
// server's status reason (InternalError: the webhook could not be called) is the
// infrastructure's, as delivering directly, where the records' write meets it: the cluster lost
// contact after the change, is restored, and the next plan refuses to take the revision further.
func (r *fluxRun) confirm(ctx context.Context, target, digest string) error {
	token := fmt.Sprintf("%s-%d", r.w.svc.clock.Now().UTC().Format(time.RFC3339Nano), r.requests.Add(1))
	// A request the management cluster fails is asked again, as the waits read again: a passing
	// 503 there is no reason to call the cluster lost.
	for {
		err := r.d.RequestReconcile(ctx, r.w.spec.ClusterNamespace, target, token)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(fluxPoll):
		}
	}
	return r.waitOn(ctx, target, digest, token)
}

// fluxStatus is target's Kustomization's status: from the run's watch when it is established
// (with a channel closed at the next change), else read. A nil channel never fires: the caller
// then reads again when its poll interval is up. A Kustomization the watch has not seen is
// read: it may have been created a moment ago (by this run's pin), and "gone" is a verdict.
func (r *fluxRun) fluxStatus(ctx context.Context, target string) (fluxdelivery.Status, <-chan struct{}, error) {
	if r.statuses != nil {
		if st, changed, ok := r.statuses.Status(target); ok && st.Exists {
			return st, changed, nil
		}
	}
	st, err := r.d.Read(ctx, r.w.spec.ClusterNamespace, target)
	return st, nil, err
}

// fluxMark marks a Flux failure with the engine's class (blame.Mark of Classify's verdict).
func fluxMark(err error) error { return blame.Mark(err) }

// restore is one attempt to return target to revision by pinning it again and waiting for it;
// "" deletes the Kustomization, and Flux prunes what it applied. From a desired revision that
// brings admission configuration, the backup is pinned disarmed first (disarm).
func (r *fluxRun) restore(ctx context.Context, target, revision string) error {
	if revision == "" {
		return r.d.Remove(ctx, r.w.spec.ClusterNamespace, target, fluxPoll, false)
	}
	if revision != r.w.spec.Revision && r.bringsAdmission(target) {
		if err := r.disarm(ctx, target, revision); err != nil {
			return fmt.Errorf("remove the admission configuration of %s first: %w", r.w.spec.Revision, err)
		}
	}
	if err := r.fluxPin(ctx, target, revision); err != nil {
		return err
	}
	return r.verify(ctx, target, revision)
}

// disarm pins target's Kustomization to revision (the backup) disarmed (fluxdelivery.Disarmed)
// and waits within ctx for Flux to have applied it: Flux prunes the admission configuration the
// undone revision added, and leaves the rest as it runs, so that the backup's own dry-runs no
// longer meet it (fluxdelivery/admission.go).
func (r *fluxRun) disarm(ctx context.Context, target, revision string) error {
	state, err := r.w.svc.fluxStore(r.w.spec.RecordNamespace).Load(ctx, FluxRecordKey(r.w.spec.Key, target))
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	objs, err := r.w.objectsOf(state, target, revision)
	if err != nil {
		return err
	}
	manifests, err := fluxdelivery.Manifests(fluxdelivery.Disarmed(objs))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(manifests)
	digest, err := r.d.Publish(ctx, revision+"-"+hex.EncodeToString(sum[:])[:12], manifests)
	if err != nil {
		return err
	}
	if err := r.pin(ctx, r.restored, target, fluxdelivery.Pinning{Digest: digest, Timeout: r.w.spec.Policy.VerifyTimeout}); err != nil {
		return err
	}
	return r.waitOn(ctx, target, digest, "")
}

// record is one attempt of Record for a target event through Flux: the cluster's records live
// in the management cluster, and Flux's own inventory is what it prunes by: nothing is adopted.
func (r *fluxRun) record(ctx context.Context, ev engine.Event) error {
	w := r.w
	store, key := w.svc.fluxStore(w.spec.RecordNamespace), FluxRecordKey(w.spec.Key, ev.Target)
	if ev.Kind == engine.EventProvisioning {
		desired, err := r.sealedDesired(ev.Target)
		if err != nil {
			return err
		}
		return store.MarkProvisioning(ctx, key, records.Revision{Revision: ev.Revision, Manifests: desired})
	}
	return recordTransition(ctx, store, key, ev)
}

// recordInvalid writes a revision's failure on target to the ledger and to the cluster's records,
// which are beside it in the management cluster (delivering directly: directRun.recordInvalid).
func (r *fluxRun) recordInvalid(ctx context.Context, ev engine.Event) error {
	w := r.w
	rctx, cancel := w.svc.clock.WithTimeout(ctx, recordRetryWindow)
	defer cancel()
	return w.retry(rctx, ev.Target, func(ctx context.Context) error {
		lerr := w.recordLedger(ctx, ev)
		werr := w.svc.fluxStore(w.spec.RecordNamespace).MarkInvalid(ctx, FluxRecordKey(w.spec.Key, ev.Target), ev.Revision, ev.Reason)
		if lerr != nil {
			return fmt.Errorf("record the ledger entry: %w", lerr)
		}
		return werr
	})
}

// remove removes the rollout from cluster name through Flux: the Kustomization deleted (Flux
// prunes what it applied, but Namespaces, CRDs and what is marked gradual.dev/prune: disabled;
// nothing with orphan), then the records in the management cluster.
func (e fluxEngine) remove(s *Service, ctx context.Context, spec Spec, name string, orphan bool) (string, error) {
	if err := records.Fenced(ctx); err != nil {
		return "", err
	}
	store, rkey := s.fluxStore(spec.RecordNamespace), FluxRecordKey(spec.Key, name)
	state, err := store.Load(ctx, rkey)
	if err != nil {
		return "", fmt.Errorf("read records: %w", err)
	}
	gone, err := s.goneOf(ctx, spec.ClusterNamespace, name)
	if err != nil {
		return "", err
	}
	if gone != "" {
		// Nothing is left to prune in a cluster that is gone, and kustomize-controller's finalizer
		// would hold the Kustomization for as long as it cannot read the cluster's kubeconfig
		// Secret (deleted with the Cluster): it is let go without pruning.
		orphan = true
	}
	d := fluxdelivery.New(s.mgmt.Client, e.settings, spec.Key)
	if gone == "" && holdsNothing(state) {
		// No record of the rollout here, in this record namespace: what its Kustomization (if
		// any) applies was never recorded by this state, as when delivering directly, where such
		// a cluster has nothing to delete. Its records were deleted, or it is another state's
		// (the Kustomization is named after the rollout alone, whatever the record namespace);
		// deleting it would have Flux prune what runs there.
		return fluxUnrecordedNote(ctx, d, spec, name)
	}
	if err := d.Remove(ctx, spec.ClusterNamespace, name, fluxPoll, orphan); err != nil {
		return "", err
	}
	if err := store.Delete(ctx, rkey); err != nil {
		return "", err
	}
	if orphan {
		return "", nil
	}
	return fluxKeptNote(name, state), nil
}

// fluxUnrecordedNote says that the Kustomization of spec's rollout on cluster, if there is one, is
// left in place by a removal that finds no record of it.
func fluxUnrecordedNote(ctx context.Context, d *fluxdelivery.Delivery, spec Spec, cluster string) (string, error) {
	st, err := d.Read(ctx, spec.ClusterNamespace, cluster)
	if err != nil || !st.Exists {
		return "", err
	}
	return fmt.Sprintf("%s: its Kustomization %s/%s is left in place, with what Flux applies through it: there is no record of %s "+
		"for the cluster in record namespace %s (records missing, or another state's rollout), so removing it could prune what "+
		"runs there", cluster, spec.ClusterNamespace, fluxdelivery.ObjectName(spec.Key, cluster), spec.Key.Describe(), spec.RecordNamespace), nil
}

// fluxKeptNote says which objects of the revisions a cluster's records hold Flux left in place
// when its Kustomization went (fluxdelivery.Kept), "" for none.
func fluxKeptNote(cluster string, state *records.State) string {
	seen := map[string]bool{}
	var kept []string
	for _, r := range allRecords(state) {
		set, err := manifest.FromCanonical(r.Manifests)
		if err != nil || len(r.Manifests) == 0 {
			continue
		}
		for _, k := range fluxdelivery.Kept(set.Objects) {
			if !seen[k] {
				seen[k] = true
				kept = append(kept, k)
			}
		}
	}
	if len(kept) == 0 {
		return ""
	}
	slices.Sort(kept)
	return fmt.Sprintf("%s: left in place by Flux, which never prunes a Namespace, a CustomResourceDefinition or an object marked "+
		"gradual.dev/prune: disabled (through Flux the runner cannot read the cluster to tell whether they hold objects of others "+
		"or existed before the rollout; delete them yourself once empty): %s", cluster, strings.Join(kept, ", "))
}

// RevisionSettings is what of a resource's delivery settings is part of its revision: through
// Flux (flux not nil), where the artifact is and what source-controller pulls with
// (fluxdelivery.Settings.RevisionSettings); delivering directly, nothing.
func RevisionSettings(flux *FluxSettings) []byte {
	if flux == nil {
		return nil
	}
	return flux.RevisionSettings()
}

// FluxSettings are a resource's `delivery.flux` settings (fluxdelivery.Settings), so that
// resources configure the Flux engine without importing it.
type FluxSettings = fluxdelivery.Settings

// FluxKustomize is Spec.Kustomize (fluxdelivery.Kustomize), so that callers shape the
// Kustomizations without importing the Flux engine.
type FluxKustomize = fluxdelivery.Kustomize

// FluxDecryption is how Flux decrypts the sensitive objects (fluxdelivery.Decryption).
type FluxDecryption = fluxdelivery.Decryption

// FluxCredentials are the credentials the Flux engine pushes with (fluxdelivery.Credentials).
type FluxCredentials = fluxdelivery.Credentials

// skipError is a cluster's reason to be left alone by this run (a suspended Kustomization), as
// an error of observeCluster: the cluster is then skipped with it, not as unreadable.
type skipError string

func (e skipError) Error() string { return string(e) }

// fluxSuspended says why the cluster is left alone when its Kustomization for key is suspended
// (`flux suspend kustomization`): Flux would not act on a new pin, so the run would only wait
// for its verify timeout; someone stopped delivery there on purpose. "" when it is not.
func (s *Service) fluxSuspended(ctx context.Context, d *fluxdelivery.Delivery, namespace, cluster string) (string, error) {
	st, err := d.Read(ctx, namespace, cluster)
	if err != nil {
		return "", fmt.Errorf("read the Kustomization of %s: %w", cluster, err)
	}
	return suspendedReason(st, d.Key(), namespace, cluster), nil
}

func suspendedReason(st fluxdelivery.Status, key records.Key, namespace, cluster string) string {
	if !st.Suspended {
		return ""
	}
	return fmt.Sprintf("its Flux Kustomization is suspended (resume it with `flux resume kustomization -n %s %s`)",
		namespace, fluxdelivery.ObjectName(key, cluster))
}

// unread is the error of an observation through Flux some of whose clusters could not be read,
// nil when every cluster was read (or skipped on purpose: skipError). Delivering directly an
// unreadable cluster is that cluster's trouble (its own API server, its
// kubeconfig): it is skipped, shown in the plan, and the rest of the fleet goes on. In Flux mode
// every read is of the management cluster (the Kustomization, the OCIRepository, the records): a
// failure there — a missing RBAC rule, the API server gone — says nothing about the cluster and
// would, if skipped, leave the whole fleet out of the run as "unreadable" without anyone having
// decided it. So the plan (and apply, which observes again) stops, naming what failed.
func (fluxEngine) unread(errs map[string]error) error {
	var unread []string
	for _, name := range sortedKeys(errs) {
		var skip skipError
		if !errors.As(errs[name], &skip) {
			unread = append(unread, fmt.Sprintf("%s: %s", name, firstLine(errs[name].Error())))
		}
	}
	if len(unread) == 0 {
		return nil
	}
	const shown = 5
	n, more := len(unread), ""
	if n > shown {
		more = fmt.Sprintf("\n  … and %d more", n-shown)
		unread = unread[:shown]
	}
	return usererr.New("Management Cluster Not Readable",
		fmt.Sprintf("With delivery.flux, every cluster's Flux objects and records are read in the management cluster, and %d of them could not be read. "+
			"Rather than leave those clusters out, nothing is planned or changed until they can be read "+
			"(check the management cluster and the runner's permissions there: the RBAC guide's Flux roles):\n  %s%s",
			n, strings.Join(unread, "\n  "), more))
}

// fluxRead is what a plan reads in the management cluster of every cluster of a rollout in Flux
// mode: its Kustomizations, OCIRepositories and per-cluster records, each kind in one list (in
// pages), so that the requests a plan makes do not grow with the fleet.
type fluxRead struct {
	objects *fluxdelivery.Objects
	states  map[records.Key]*records.State
	errs    map[records.Key]error
}

// fluxReadAll reads the Flux objects and records of key's clusters in the management cluster.
// A list that fails is the management cluster's failure, and stops the plan as unread does.
func (s *Service) fluxReadAll(ctx context.Context, settings fluxdelivery.Settings, namespace string, key records.Key, recordNamespace string, clusters []string) (*fluxRead, error) {
	if len(clusters) == 0 {
		return &fluxRead{objects: &fluxdelivery.Objects{}}, nil
	}
	keys := make([]records.Key, len(clusters))
	for i, name := range clusters {
		keys[i] = FluxRecordKey(key, name)
	}
	// The Flux objects and the records are read together: at 1,000 clusters each is a few
	// pages, and the plan waits on the management API server for each page in turn.
	read := &fluxRead{}
	var g errgroup.Group
	g.Go(func() (err error) {
		read.objects, err = fluxdelivery.New(s.mgmt.Client, settings, key).ReadAll(ctx, namespace)
		return err
	})
	g.Go(func() (err error) {
		read.states, read.errs, err = s.fluxStore(recordNamespace).Summaries(ctx, keys)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, managementUnread(len(clusters), err)
	}
	return read, nil
}

// managementUnread is unread's error for a list of the management cluster that failed: every
// one of the n clusters is unread by it.
func managementUnread(n int, err error) error {
	return usererr.New("Management Cluster Not Readable",
		fmt.Sprintf("With delivery.flux, every cluster's Flux objects and records are read in the management cluster, and they could not be read "+
			"for the %d clusters. Rather than leave those clusters out, nothing is planned or changed until they can be read "+
			"(check the management cluster and the runner's permissions there: the RBAC guide's Flux roles):\n  %s",
			n, firstLine(err.Error())))
}

// view is the reason the cluster is left alone (its Kustomization of key suspended), and with
// drift, Flux's view when it disagrees with the records (fluxdelivery.Drift).
func (f *fluxRead) view(key records.Key, namespace, cluster string, drift bool) (skip, disagrees string) {
	st := f.objects.Status(cluster)
	if skip = suspendedReason(st, key, namespace, cluster); skip != "" || !drift {
		return skip, ""
	}
	pinned, exists := f.objects.Pinned(cluster)
	return "", fluxdelivery.Drift(st, pinned, exists)
}

// summary is the records of recordKey (a cluster's FluxRecordKey), as records' Summary reads them.
func (f *fluxRead) summary(recordKey records.Key) (*records.State, error) {
	if err := f.errs[recordKey]; err != nil {
		return nil, err
	}
	return f.states[recordKey], nil
}

// fluxObjects are what the artifact of spec's revision holds for target through Flux: objs, its
// objects there, the sensitive ones encrypted (fluxSealed), and its check Job
// (CheckJob.ForFlux), if any.
// fluxSealed is objs with the objects of Sensitive encrypted for settings' age recipient
// (fluxdelivery.Settings.Seal): what the artifact and the management cluster's records hold.
func (spec *Spec) fluxSealed(settings FluxSettings, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if len(spec.Sensitive) == 0 {
		return objs, nil
	}
	sensitive := make(map[string]bool, len(spec.Sensitive))
	for _, k := range spec.Sensitive {
		sensitive[k] = true
	}
	return settings.Seal(objs, sensitive)
}

func (spec *Spec) fluxObjects(settings FluxSettings, objs []*unstructured.Unstructured, target string) ([]*unstructured.Unstructured, error) {
	objs, err := spec.fluxSealed(settings, objs)
	if err != nil {
		return nil, err
	}
	// The Job as given: with values a template, rendered with the rest by the Kustomization.
	job, err := spec.CheckJob.ForFlux(target, spec.Revision, false)
	if err != nil || job == nil {
		return objs, err
	}
	return append(slices.Clip(objs), job), nil
}

// FluxArtifact is what an apply through Flux publishes and pins for a revision, as the plan
// shows it: computed from the planned content, before anything is pushed.
type FluxArtifact struct {
	// Ref is the artifact's reference, "oci://host/path:revision".
	Ref string
	// Digest is the digest every cluster is pinned to ("sha256:…").
	Digest string
	// Template says the artifact is a template (values): each cluster's Kustomization
	// substitutes the cluster's variables (postBuild.substitute).
	Template bool
}

// pinned is the artifact of spec's revision through Flux.
func (e fluxEngine) pinned(spec Spec) (*FluxArtifact, error) {
	out := &FluxArtifact{Ref: fluxdelivery.ArtifactRef(e.settings, spec.Revision), Template: spec.Values != nil}
	objs, err := spec.fluxObjects(e.settings, spec.Objects.Objects, "")
	if err != nil {
		return out, err
	}
	manifests, err := fluxdelivery.Manifests(objs)
	if err != nil {
		return out, err
	}
	out.Digest, err = fluxdelivery.ArtifactDigest(spec.Revision, manifests)
	return out, err
}

// checkPinned refuses, before the Lease is taken and any cluster pinned, an apply of spec's
// revision whose tag holds other content than the planned one (someone published another
// artifact under it after the plan), naming the repository, the tag and both digests. With
// values each cluster's artifact is checked as it is published (fluxPin).
func (e fluxEngine) checkPinned(s *Service, ctx context.Context, spec Spec) error {
	objs, err := spec.fluxObjects(e.settings, spec.Objects.Objects, "")
	if err != nil {
		return err
	}
	manifests, err := fluxdelivery.Manifests(objs)
	if err != nil {
		return err
	}
	err = fluxdelivery.New(s.mgmt.Client, e.settings, spec.Key).Check(ctx, spec.Revision, manifests)
	if errors.Is(err, fluxdelivery.ErrTagHoldsOther) {
		return usererr.Wrap(err, "Artifact Tag Holds Other Content",
			"The plan computed the digest of the revision's artifact from its manifests; the registry holds something else under its tag. "+
				"Nothing was pinned and no cluster was changed.")
	}
	return err
}

// leftBehind are the clusters of placed (changed by earlier runs) whose Cluster no longer exists:
// in none of present. Delivering directly none (nothing is left of a deleted Cluster). Through
// Flux their Kustomization, OCIRepository and records stay in the management cluster, and Flux
// would deliver the old revision again, with no plan and no wave, to a Cluster re-created under
// the name (its kubeconfig Secret is what the Kustomization names). So they leave as a relabelled
// cluster does: the next plan lists them in `leaving`, its apply removes their Flux objects and
// records, and so does destroy.
func (fluxEngine) leftBehind(placed []string, present ...[]fleet.Cluster) []string {
	var gone []string
	for _, name := range placed {
		if !slices.ContainsFunc(present, func(cs []fleet.Cluster) bool {
			return slices.ContainsFunc(cs, func(c fleet.Cluster) bool { return c.Name == name })
		}) {
			gone = append(gone, name)
		}
	}
	return gone
}
