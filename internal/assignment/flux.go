package assignment

import (
	"context"
	"slices"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// FluxArtifacts are, for each module of spec among modules (in spec's order), the artifact an
// apply through Flux publishes and pins (delivery.FluxArtifact): what the plan shows.
func FluxArtifacts(svc *delivery.Service, spec Spec, modules []string) (names []string, artifacts []delivery.FluxArtifact, err error) {
	for _, m := range spec.Modules {
		if !slices.Contains(modules, m.Name) {
			continue
		}
		a, err := svc.FluxArtifact(spec.moduleSpec(m))
		if err != nil {
			return nil, nil, err
		}
		names, artifacts = append(names, m.Name), append(artifacts, a)
	}
	return names, artifacts, nil
}

// FluxCheckArtifacts is delivery.FluxCheckArtifact for each module of spec among modules (all
// of them when modules is nil): apply's refusal, before anything is pinned, of a module
// revision's tag that holds other content than the planned one.
func FluxCheckArtifacts(ctx context.Context, svc *delivery.Service, spec Spec, modules []string) error {
	for _, m := range spec.Modules {
		if modules != nil && !slices.Contains(modules, m.Name) {
			continue
		}
		if err := svc.FluxCheckArtifact(ctx, spec.moduleSpec(m)); err != nil {
			return err
		}
	}
	return nil
}
