// Package ownerupdate carries out the in-place update plans of package owners: the writes and
// the waits. Execute holds the Leases of the owner's machines (one per owner, for the provider's
// lease_duration), creates the rotated templates, writes the owner (under the resourceVersion
// the plan read) and waits until Cluster API is done: the owner's generation observed, its
// replicas all up to date and available, every Machine UpToDate and not updating, every Node
// Ready on the desired kubelet version. It never writes a Machine, an infrastructure machine or
// a bootstrap config. For a Cluster built from a ClusterClass, ApplyCluster writes
// spec.topology.version (and the topology variables) to the Cluster instead and waits for its
// TopologyReconciled condition and the owners the topology controller upgrades.
//
// ApplyCluster and VerifyCluster are one planned cluster of a fleet update, its owners in order
// (the control plane first); fleetupdate paces them over the fleet. Their errors are marked for
// the engine: a change Cluster API did not finish in time is the change's failure
// (ErrNotVerified), a change refused before anything was written is refused.
//
// It knows nothing of Terraform; errors meant for the person running it are usererr.Errors.
package ownerupdate
