package fluxdelivery

import (
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// ApplyOnce annotation: kustomize-controller (v1.9.6, through fluxcd/pkg/ssa's
// IfNotPresentSelector) creates an object that carries it when it is missing and otherwise
// leaves it alone: never updated, never put back when edited.
const (
	AnnotationSSA   = "kustomize.toolkit.fluxcd.io/ssa"
	SSAIfNotPresent = "IfNotPresent"
)

// Kustomize is how a rollout's Kustomizations behave beyond applying its revision: what they
// wait for, how they judge the objects' health and whether Flux keeps re-applying. The zero
// value: no dependencies, kstatus judges every object, Flux re-applies every interval and
// repairs drift.
type Kustomize struct {
	// DependsOn are the rollouts (a module's depends_on: the other modules' keys) whose
	// Kustomization on the same cluster must be Ready before Flux applies this one's: Flux's
	// dependsOn, between Kustomizations of one cluster. kustomize-controller checks it before
	// each apply, including those between the provider's (interval, a restarted controller),
	// and holds back with DependencyNotReady (re-checked every --requeue-dependency) while one
	// is missing or not ready.
	DependsOn []records.Key
	// ApplyOnce has Flux create each object once and never re-apply it (a module assignment's
	// mode = "ApplyOnce"): the Kustomization's commonMetadata gives every object the
	// IfNotPresent annotation. Suspending the Kustomization instead would stop its
	// dependents (a suspended Kustomization never brings its status to its generation, which
	// dependsOn requires) and its pruning on deletion (kustomize-controller deletes nothing
	// for a suspended Kustomization); reconcile: disabled would keep it from creating them at
	// all. The Kustomization keeps reconciling: an object deleted by hand is created again.
	ApplyOnce bool
	// HealthChecks are verify.health_checks, the Kustomization's healthCheckExprs:
	// kustomize-controller judges the applied objects of those kinds by them instead of kstatus
	// as it waits (spec.wait), with Flux's StatusEvaluator, the one internal/health calls when
	// delivering directly, and reports a failed one as HealthCheckFailed (internal/blame: the
	// revision's failure).
	HealthChecks []health.Rule
}

// WithKustomize returns d whose Kustomizations (Pin) behave as k says.
func (d *Delivery) WithKustomize(k Kustomize) *Delivery {
	d.kustomize = k
	return d
}

// shapeKustomization sets, in the spec of the Kustomization of d on cluster (in namespace),
// what d.kustomize asks for. Fields left out are removed by the next server-side apply, so a
// module that drops a dependency, a mode changed back to Reconcile, or health checks taken out
// take effect on the next pin.
func (d *Delivery) shapeKustomization(spec map[string]any, cluster string) {
	if len(d.kustomize.DependsOn) > 0 {
		deps := make([]any, 0, len(d.kustomize.DependsOn))
		for _, k := range d.kustomize.DependsOn {
			// Same namespace (the Cluster's), so no cross-namespace reference is needed.
			deps = append(deps, map[string]any{"name": ObjectName(k, cluster)})
		}
		spec["dependsOn"] = deps
	}
	if d.kustomize.ApplyOnce {
		spec["commonMetadata"] = map[string]any{"annotations": map[string]any{AnnotationSSA: SSAIfNotPresent}}
	}
	if len(d.kustomize.HealthChecks) > 0 {
		exprs := make([]any, 0, len(d.kustomize.HealthChecks))
		for _, r := range d.kustomize.HealthChecks {
			e := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "current": r.Current}
			if r.InProgress != "" {
				e["inProgress"] = r.InProgress
			}
			if r.Failed != "" {
				e["failed"] = r.Failed
			}
			exprs = append(exprs, e)
		}
		spec["healthCheckExprs"] = exprs
	}
}
