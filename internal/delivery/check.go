package delivery

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Check asks each of clusters, without changing anything, whether it can take the desired
// objects: every kind known (or brought by a CRD in the bundle). Resources call it at plan
// time, so a bundle that cannot apply is refused before any cluster is touched.
func (s *Service) Check(ctx context.Context, spec Spec, clusters []string) error {
	_, err := s.CheckAndPreview(ctx, spec, clusters, nil)
	return err
}

// CheckAndPreview is Check, and on the clusters of preview (some of clusters) a server-side
// dry-run of the objects too (apply.Applier.Preview), in the same pass: one connection and
// one check per cluster. The dry-runs of all clusters share spec.Preview's time budget; a
// cluster whose dry-run did not finish within it, or whose API failed, is listed as not
// previewed, never as passing. A rejection is in the Preview (see Preview.Refusal), not the
// error, which is Check's.
func (s *Service) CheckAndPreview(ctx context.Context, spec Spec, clusters, preview []string) (*Preview, error) {
	var out *Preview
	if len(preview) > 0 {
		out = &Preview{Mode: spec.Preview.mode(), Budget: spec.Preview.budget(), Clusters: map[string]ClusterPreview{}}
	}
	return s.engine.preview(s, ctx, spec, clusters, preview, out)
}

// preview checks spec's objects on clusters, previewing those of preview into out, delivering
// directly.
func (directEngine) preview(s *Service, ctx context.Context, spec Spec, clusters, preview []string, out *Preview) (*Preview, error) {
	previewed := map[string]bool{}
	for _, name := range preview {
		previewed[name] = true
	}
	// One deadline for every cluster, from now: clusters waiting for a turn use it up too, so
	// the plan waits at most the budget, however large the fleet.
	previewCtx, cancel := spec.Preview.withBudget(ctx)
	defer cancel()
	var mu sync.Mutex
	errs := s.forEach(ctx, clusters, func(ctx context.Context, name string) error {
		c, objs, err := s.clusterObjects(ctx, spec, name)
		if err != nil {
			return err
		}
		if err := c.applier.Check(ctx, objs); err != nil || !previewed[name] {
			return err
		}
		found := previewOne(previewCtx, c.applier, objs, spec.Redact)
		mu.Lock()
		out.Clusters[name] = found
		mu.Unlock()
		return nil
	})
	if len(errs) == 0 {
		return out, nil
	}
	var lines []string
	for _, name := range sortedKeys(errs) {
		lines = append(lines, fmt.Sprintf("%s: %v", name, errs[name]))
	}
	return out, usererr.New("Manifests Cannot Be Applied",
		"The manifests cannot be applied to these clusters, so nothing was applied anywhere:\n  "+strings.Join(lines, "\n  ")+
			"\nInstall the missing CRDs first (or add them to the manifests), or leave the objects that need them out.")
}
