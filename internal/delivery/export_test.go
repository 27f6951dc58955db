package delivery

import (
	"context"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
)

// What the external tests (package delivery_test, which may import the resources that import
// delivery) reach of the package's unexported parts.
var (
	Redact        = redact
	RevisionClass = revisionClass
)

// revisionClass is the engine class blame gives err (nil: unsettled), as classify marks it.
func revisionClass(err error) error {
	switch blame.Of(err).Class {
	case blame.Revision:
		return engine.ErrRevisionFailed
	case blame.Refused:
		return engine.ErrChangeRefused
	case blame.Gone:
		return engine.ErrTargetGone
	}
	return nil
}

// RedactedText is what stands in for a hidden value.
const RedactedText = redactedText

// record is one attempt of the world's engine's Record for ev (the engine of w's service when
// the test built w without one).
func (w *world) record(ctx context.Context, ev engine.Event) error {
	if w.engine == nil {
		w.engine = w.svc.engine.run(w)
	}
	return w.engine.record(ctx, ev)
}

// observeOne reads one cluster's records of spec's rollout as an observation does.
func observeOne(ctx context.Context, svc *Service, spec Spec, name string) (engine.TargetRecord, ClusterState, error) {
	read, err := svc.engine.reader(svc, ctx, spec.ClusterNamespace, spec.Key, spec.RecordNamespace, []string{name})
	if err != nil {
		return engine.TargetRecord{}, ClusterState{}, err
	}
	return read(ctx, name, nil, false, false)
}

// fluxSettingsOf is the Flux settings of a service that delivers through Flux.
func fluxSettingsOf(svc *Service) fluxdelivery.Settings { return svc.engine.(fluxEngine).settings }

// fluxRunOf is the Flux engine's part of w.
func fluxRunOf(w *world) *fluxRun { return w.engine.(*fluxRun) }

// pinnedOf is what an apply of spec pins through svc, which delivers through Flux.
func pinnedOf(t *testing.T, svc *Service, spec Spec) FluxArtifact {
	t.Helper()
	a, err := svc.Pinned(spec)
	if err != nil || a == nil {
		t.Fatalf("Pinned: %v, %v", a, err)
	}
	return *a
}
