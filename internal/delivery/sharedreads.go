package delivery

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// sharedReadsMaxAge bounds how old a refresh's reads may be when its plan takes them: the CLI
// plans a resource right after refreshing it, and a plan that comes much later reads again.
const sharedReadsMaxAge = 30 * time.Second

// readRole is what an observation does with the management cluster's reads it makes in Flux
// mode (fluxReadAll): nothing, keep them for the plan that follows (a refresh), or take the
// ones its refresh kept (a plan).
type readRole int

const (
	readsOwn readRole = iota
	readsKeep
	readsTake
)

// sharedReads hands the Flux reads of a refresh to the plan of the same resource that follows it
// in the same provider process. Terraform and OpenTofu refresh a resource (ReadResource) and then
// plan it (PlanResourceChange) one after the other; both read every cluster's Kustomization,
// OCIRepository and records in the management cluster, lists that take seconds at 1,000 clusters
// on a management API server kept busy by Flux itself. The plan then shows the fleet as the
// refresh read it, a moment before. A read is taken once, only for the same rollout, namespaces
// and eligible clusters, and only within sharedReadsMaxAge. Apply never takes one: it reads
// again under its Lease.
type sharedReads struct {
	mu   sync.Mutex
	kept map[string]keptRead
}

type keptRead struct {
	read *fluxRead
	at   time.Time
}

func newSharedReads() *sharedReads { return &sharedReads{kept: map[string]keptRead{}} }

// sharedReadKey identifies what a fluxRead was read for.
func sharedReadKey(namespace string, key records.Key, recordNamespace string, clusters []string) string {
	return strings.Join([]string{namespace, key.String(), recordNamespace, strings.Join(clusters, ",")}, "\x00")
}

// keep stores read for the next take of id, dropping reads past their age.
func (r *sharedReads) keep(id string, read *fluxRead, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.kept {
		if now.Sub(v.at) > sharedReadsMaxAge {
			delete(r.kept, k)
		}
	}
	r.kept[id] = keptRead{read: read, at: now}
}

// take returns and forgets the read kept for id; nil when there is none, or it is too old.
func (r *sharedReads) take(id string, now time.Time) *fluxRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.kept[id]
	delete(r.kept, id)
	if !ok || now.Sub(v.at) > sharedReadsMaxAge || now.Before(v.at) {
		return nil
	}
	return v.read
}

// Refreshing is s for a resource's refresh: its reads of the management cluster in Flux mode
// are kept for the plan that follows (sharedReads).
func (s *Service) Refreshing() *Service {
	out := *s
	out.reads = readsKeep
	return &out
}

// Planning is s for a resource's plan: it takes the reads its refresh kept, if any
// (sharedReads). Plan does this by itself.
func (s *Service) Planning() *Service {
	out := *s
	out.reads = readsTake
	return &out
}

// fluxReads is fluxReadAll, through sharedReads for a refresh or a plan.
func (s *Service) fluxReads(ctx context.Context, settings fluxdelivery.Settings, namespace string, key records.Key, recordNamespace string, clusters []string) (*fluxRead, error) {
	if s.shared == nil || s.reads == readsOwn {
		return s.fluxReadAll(ctx, settings, namespace, key, recordNamespace, clusters)
	}
	id := sharedReadKey(namespace, key, recordNamespace, clusters)
	if s.reads == readsTake {
		if read := s.shared.take(id, s.clock.Now()); read != nil {
			return read, nil
		}
		return s.fluxReadAll(ctx, settings, namespace, key, recordNamespace, clusters)
	}
	read, err := s.fluxReadAll(ctx, settings, namespace, key, recordNamespace, clusters)
	if err == nil {
		s.shared.keep(id, read, s.clock.Now())
	}
	return read, err
}
