package delivery

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The port between the rollout logic and the clusters. Everything that decides (waves, canary,
// budget and bake, blame, the ledger, the progress record, the Lease, the plan) is the same for
// every engine and lives outside it; a delivery engine is only how a revision reaches a cluster,
// how what runs there is read back, and where a cluster's records live. Two implement it:
// directEngine (direct.go: the provider applies to each workload cluster itself) and fluxEngine
// (flux.go: each revision an OCI artifact, one Kustomization per cluster that Flux's
// kustomize-controller applies). The engine is chosen once, when the service is configured (New,
// WithFlux); nothing outside the two implementations asks which one runs.

// deliveryEngine is what an engine does for a rollout outside a run: find the fleet, read each
// cluster's records and state, check what an apply would meet, and remove the rollout from a
// cluster. Its methods take the service they serve, since a Service is copied for its roles
// (Refreshing, Planning) and the copy's role must hold.
type deliveryEngine interface {
	// discover lists the Clusters q picks; goneReason says whether one left the fleet.
	discover(s *Service, ctx context.Context, q fleet.Query) (*fleet.Discovery, error)
	goneReason(s *Service, ctx context.Context, namespace, name string) (string, error)

	// reader prepares one observation of key's clusters; unread is the error that stops the
	// observation when some of them could not be read (nil: those are skipped, the rest go on).
	reader(s *Service, ctx context.Context, namespace string, key records.Key, recordNamespace string, clusters []string) (clusterReader, error)
	unread(errs map[string]error) error
	// leftBehind are the clusters of placed (changed by earlier runs) that exist in none of
	// present but whose delivery is still in place: they leave as a relabelled cluster does.
	leftBehind(placed []string, present ...[]fleet.Cluster) []string
	// markUnrecorded marks the clusters of obs whose records hold nothing but which hold the
	// rollout's objects (unrecorded.go).
	markUnrecorded(s *Service, ctx context.Context, namespace string, key records.Key, obs *Observation, placedOnly bool,
		objectsFor func(string) ([]*unstructured.Unstructured, error))
	// drifted says which of the targets on the desired revision must be delivered again.
	drifted(s *Service, ctx context.Context, spec Spec, targets []engine.Target) map[string]bool

	// ownership reads the claims on spec's objects and the objects apply would adopt (claims.go);
	// checkOwners is its apply-time half; preview fills out's per-cluster previews (check.go).
	ownership(s *Service, ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool, withClaims, withAdoptions bool) ([]Claim, []Found, error)
	checkOwners(s *Service, ctx context.Context, spec Spec, clusters []string) error
	preview(s *Service, ctx context.Context, spec Spec, clusters, preview []string, out *Preview) (*Preview, error)

	// ready refuses what makes delivery impossible before anything is written; checkPinned
	// refuses an apply whose planned content the engine cannot deliver as planned; pinned is
	// what an apply of spec pins, as the plan shows it (nil: the engine pins nothing).
	ready(s *Service, ctx context.Context) error
	checkPinned(s *Service, ctx context.Context, spec Spec) error
	pinned(spec Spec) (*FluxArtifact, error)

	// readyNow reads once whether objs are ready on a workload cluster (ReadyNow).
	readyNow(s *Service, ctx context.Context, namespace, name string, key records.Key, objs []*unstructured.Unstructured) error

	// remove removes the rollout from one cluster (destroy, a cluster that left): what it made
	// is deleted unless orphan, what it adopted given back; note says what was given back.
	remove(s *Service, ctx context.Context, spec Spec, name string, orphan bool) (note string, err error)

	// fieldManager is the server-side apply field manager the engine applies key's objects with
	// in the workload clusters; inherit takes over, on cluster name, the fields another engine
	// applied there under manager, once that engine let go of it (move.go).
	fieldManager(key records.Key) string
	inherit(s *Service, ctx context.Context, spec Spec, name, manager string) error

	// run is the engine's part of one run's World.
	run(w *world) engineRun
}

// clusterReader reads one cluster's records of a rollout (and, with drift, whether what runs
// there still matches them): the per-cluster half of an observation (observe.go).
// ignore names the fields drift leaves out; rendered says the rollout has values (its current
// record's objects are kept in the state, to compare with the cluster's rendering).
type clusterReader func(ctx context.Context, name string, ignore apply.Ignore, drift, rendered bool) (engine.TargetRecord, ClusterState, error)

// engineRun is what an engine does to one cluster in a run, for the engine's World (world.go),
// which adds the retries, the gates and the records that every engine shares.
type engineRun interface {
	// start begins what the run follows while it lasts (Flux: a watch of the Kustomizations);
	// the returned func ends it.
	start(ctx context.Context) (stop func())
	// apply is one attempt to deliver revision to target; restore one attempt to return it to
	// revision ("" removes everything the rollout delivered). Each is idempotent.
	apply(ctx context.Context, target, revision string) error
	restore(ctx context.Context, target, revision string) error
	// verify waits, within ctx, until revision runs on target and is healthy, retrying what the
	// infrastructure fails.
	verify(ctx context.Context, target, revision string) error
	// record is one attempt to keep target's records in step with ev; recordInvalid writes a
	// revision's failure on target, in the cluster's records and the ledger.
	record(ctx context.Context, ev engine.Event) error
	recordInvalid(ctx context.Context, ev engine.Event) error
	// changing is told that target is about to change; batch that only targets change now.
	changing(target string)
	batch(targets []string)
	// held is the engine's own reason to leave target alone this run, "" for none.
	held(target string) string
	// readGate reads target's cluster gate as far as the engine reaches (gate.go).
	readGate(ctx context.Context, target string) (blame.GateReading, error)
}

// Ready refuses, in the person's words, what makes delivery impossible before anything is
// written (through Flux: a management cluster without Flux's CRDs, a registry that cannot be
// reached or refuses a push).
func (s *Service) Ready(ctx context.Context) error { return s.engine.ready(s, ctx) }

// CheckPinned refuses, before the Lease is taken and anything is changed, an apply of spec whose
// planned content the engine cannot deliver as planned (through Flux: a tag that holds other
// content than the planned artifact).
func (s *Service) CheckPinned(ctx context.Context, spec Spec) error {
	return s.engine.checkPinned(s, ctx, spec)
}

// Pinned is what an apply of spec pins, computed from the planned content, for the plan to show;
// nil when the engine pins nothing (delivering directly).
func (s *Service) Pinned(spec Spec) (*FluxArtifact, error) { return s.engine.pinned(spec) }
