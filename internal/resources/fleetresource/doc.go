// Package fleetresource is what the provider's resources and data sources over a fleet have in
// common, so that a rule holds for all of them or for none: the attributes that pick clusters (namespace,
// selector, names), how each cluster is verified (`verify`), the per-cluster `values` of the
// resources that render their manifests per cluster, the validators that report bad
// input at plan time, and the lifecycle of the resources that run through an engine: the
// Create/Update path with its rule for what a failure saves and the ModifyPlan path with its
// order of steps, which all three take (`gradual_rollout` and `gradual_module_assignment`
// through internal/delivery, `gradual_inplace_update` through the in-place update services),
// provider data, `namespace/name` import, plan-time wording and `waves` in one line. What each
// resource applies, and how it plans its waves, stays in its own package.
package fleetresource
