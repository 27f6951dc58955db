package assignment

import (
	"context"
	"slices"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// Pinned are, for each module of spec among modules (in spec's order), what an apply pins
// (delivery.Service.Pinned): what the plan shows. None when the engine pins nothing.
func Pinned(svc *delivery.Service, spec Spec, modules []string) (names []string, artifacts []delivery.FluxArtifact, err error) {
	for _, m := range spec.Modules {
		if !slices.Contains(modules, m.Name) {
			continue
		}
		a, err := svc.Pinned(spec.moduleSpec(m))
		if err != nil {
			return nil, nil, err
		}
		if a != nil {
			names, artifacts = append(names, m.Name), append(artifacts, *a)
		}
	}
	return names, artifacts, nil
}

// CheckPinned is delivery.Service.CheckPinned for each module of spec among modules (all of
// them when modules is nil): apply's refusal, before anything is pinned, of a module revision
// the engine cannot deliver as planned (through Flux: a tag that holds other content).
func CheckPinned(ctx context.Context, svc *delivery.Service, spec Spec, modules []string) error {
	for _, m := range spec.Modules {
		if modules != nil && !slices.Contains(modules, m.Name) {
			continue
		}
		if err := svc.CheckPinned(ctx, spec.moduleSpec(m)); err != nil {
			return err
		}
	}
	return nil
}
