// Package testbed runs a real local fleet for tests and the demo: a management cluster holding
// Cluster API objects and kwok workload clusters, all real kube-apiservers started by
// `kwokctl --runtime binary` from the pinned toolchain (`make tools`, DESIGN.md §4).
//
// The management cluster serves the CAPI CRDs of sigs.k8s.io/cluster-api (core, kubeadm
// bootstrap, kubeadm control plane, read from the Go module cache) and the test bed's own
// infrastructure kinds (infrastructure.gradual.dev). For each workload it holds a v1beta2
// Cluster whose status the test bed writes as CAPI's controllers would (no controllers run), a
// GradualCluster, and a <name>-kubeconfig Secret with the workload's admin kubeconfig. Workload
// clusters get kwok fake Nodes, so Deployments really schedule and their pods go Running.
//
// A fleet lives in one directory (Options.Dir): fleet.json (its state, see Load), the
// kubeconfigs, kwokctl's logs and its own KWOK_WORKDIR, so it never sees or deletes clusters it
// did not create. Down stops exactly those. In Go tests use Start (torn down by t.Cleanup; fleets
// of killed test processes are reaped by the next Start); elsewhere Up and Down, or the
// gradual-testbed command.
package testbed
