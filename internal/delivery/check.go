package delivery

import (
	"context"
	"fmt"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Check asks each of clusters, without changing anything, whether it can take the desired
// objects: every kind known (or brought by a CRD in the bundle). Resources call it at plan
// time, so a bundle that cannot apply is refused before any cluster is touched.
func (s *Service) Check(ctx context.Context, spec Spec, clusters []string) error {
	if s.flux != nil {
		return nil // Flux mode asks no workload cluster; kustomize-controller's dry-run refuses at apply
	}
	errs := s.forEach(ctx, clusters, func(ctx context.Context, name string) error {
		objs, err := spec.ObjectsFor(name)
		if err != nil {
			return err
		}
		c, err := s.cluster(ctx, spec.ClusterNamespace, name, spec.Key, spec.ForceConflicts)
		if err != nil {
			return err
		}
		return c.applier.Check(ctx, objs)
	})
	if len(errs) == 0 {
		return nil
	}
	var lines []string
	for _, name := range sortedKeys(errs) {
		lines = append(lines, fmt.Sprintf("%s: %v", name, errs[name]))
	}
	return usererr.New("Manifests Cannot Be Applied",
		"The manifests cannot be applied to these clusters, so nothing was applied anywhere:\n  "+strings.Join(lines, "\n  ")+
			"\nInstall the missing CRDs first (or add them to the manifests), or leave the objects that need them out.")
}
