// Package extension calls Cluster API runtime extensions over HTTP the way CAPI's own runtime
// client does: the same URL layout (POST <base>/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery
// and <base>/hooks.runtime.cluster.x-k8s.io/v1alpha1/<hook lowercased>/<handler>) and CAPI's wire
// types (sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1), so any real extension answers us
// unchanged.
//
// It is stricter than CAPI's client because the provider runs on an operator's machine against
// endpoints named in configuration: HTTPS only (plain HTTP only to a loopback address and only
// when explicitly allowed), no redirects, a capped response size, a per-call timeout (default
// 10 s, at most 30 s) that bounds the call including its retries, a few retries on 5xx and
// connection errors with capped waits (Retry-After included), and extension messages truncated
// before they reach an error. Every failure is an *Error whose Kind says what went wrong.
package extension
