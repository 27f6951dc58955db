// Package apply puts a bundle of Kubernetes objects onto one workload cluster and watches it
// there: server-side apply (field manager "gradual", CRDs and Namespaces first), pruning and
// deletion by inventory, readiness waits by kstatus, and drift detection by server-side dry-run.
//
// It is built on fluxcd/pkg/ssa. One Applier serves one cluster; its methods may be called
// concurrently. Check, Drift and Wait make no mutating calls. Objects passed in are never
// modified: every method works on copies.
package apply
