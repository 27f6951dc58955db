package assignment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

// CheckClaims refuses modules whose objects another owner (another assignment's module, a
// rollout, or another module of this assignment) already manages on the clusters that would
// get them. It changes nothing.
func CheckClaims(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) error {
	return checkClaims(ctx, svc, spec, apply)
}

func checkClaims(ctx context.Context, svc deliverer, spec Spec, apply map[string][]string) error {
	var all []delivery.Claim
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		claims, err := svc.Claims(ctx, spec.moduleSpec(m), apply[m.Name], nil)
		if err != nil {
			return err
		}
		all = append(all, claims...)
	}
	if len(all) == 0 {
		return nil
	}
	return delivery.ClaimsError(all, spec.Key.Describe())
}

// Adoptions lists, per module, the objects that exist already on the clusters that would get
// it, made by someone else: apply adopts them (delivery.Service.Adoptions). It changes nothing.
func Adoptions(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) ([]delivery.Found, error) {
	var all []delivery.Found
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		found, err := svc.Adoptions(ctx, spec.moduleSpec(m), apply[m.Name])
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		all = append(all, found...)
	}
	return all, nil
}

// CheckManifests asks each cluster that gets a module whether it can take the module's objects
// (with those of the modules it depends on, so a CRD from a dependency counts), and dry-runs
// them (server-side, as apply would send them) on the clusters spec.Preview picks among
// apply (PreviewTargets): the module's canary waves (or first wave) for "canary", all of apply
// for "all". The dry-runs of
// all modules share one time budget. It changes nothing; what the dry-runs found is in the
// previews (one per module that previewed, labelled with it), rejections included.
func CheckManifests(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string, waves map[string][][]string) ([]*delivery.Preview, error) {
	spec.Preview = spec.Preview.Shared(clock.System{}.Now()) // the wall clock: the budget is a context deadline
	var previews []*delivery.Preview
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		pv, err := svc.CheckAndPreview(ctx, spec.checkedSpec(m, apply[m.Name]), apply[m.Name], PreviewTargets(spec.Preview.Mode, waves[m.Name], spec.Policy.Canary, apply[m.Name]))
		if err != nil {
			return previews, fmt.Errorf("module %s: %w", m.Name, err)
		}
		if pv != nil {
			pv.Label = "module " + m.Name
			previews = append(previews, pv)
		}
	}
	return previews, nil
}

// PreviewTargets are the clusters of one module's change that mode dry-runs, as for a rollout
// (delivery.PreviewTargets): none, all of changing, or ("canary", the default) those of its
// canary waves, the leading waves of canary clusters alone, or of its first wave without them.
func PreviewTargets(mode string, waves [][]string, canary, changing []string) []string {
	n := 0
	for _, wave := range waves {
		if !slices.ContainsFunc(wave, func(c string) bool { return !slices.Contains(canary, c) }) {
			n++
			continue
		}
		break
	}
	return delivery.PreviewTargets(mode, engine.Plan{Waves: waves, CanaryWaves: n}, changing)
}

// PreviewText is what the modules' dry-runs found, one paragraph per module; "" when there is
// nothing to say.
func PreviewText(previews []*delivery.Preview) string {
	var parts []string
	skipped := map[string]bool{} // through Flux every module skips for the same reason: said once
	for _, pv := range previews {
		if pv.Skipped != "" {
			if !skipped[pv.Skipped] {
				parts = append(parts, pv.Text())
			}
			skipped[pv.Skipped] = true
			continue
		}
		if text := pv.Text(); text != "" {
			parts = append(parts, pv.Label+": "+text)
		}
	}
	return strings.Join(parts, "\n\n")
}
