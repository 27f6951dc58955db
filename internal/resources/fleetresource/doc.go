// Package fleetresource is what the provider's resources and data sources over a fleet have in
// common, so that a rule holds for all of them or for none: the attributes that pick clusters (namespace,
// selector, names), how each cluster is verified (`verify`), the per-cluster `values` of the
// resources that render their manifests per cluster, the validators that report bad
// input at plan time, and the lifecycle of the resources that apply through internal/delivery
// (provider data, `namespace/name` import, the Create/Update path with its rule for what a
// failure saves, the ModifyPlan path with its order of steps, plan-time wording and `waves` in
// one line). What each resource applies, and how it plans its waves, stays in its own package.
package fleetresource
