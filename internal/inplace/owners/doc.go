// Package owners plans in-place machine updates the way Cluster API (v1.12+, feature gate
// InPlaceUpdates) carries them out: through the machines' owner. Plan reads the owner (a
// MachineDeployment or a KubeadmControlPlane) and works out its desired state (version, patched
// spec, infrastructure and bootstrap templates rotated: copied under a content-hashed name, never
// edited), refuses owners CAPI would not update as asked (paused, OnDelete, Cluster not ready),
// reads the owner's Machines with their infrastructure machines and bootstrap configs, finds the
// update extensions (given explicitly or from ExtensionConfig objects, through their Discovery
// hook; one installed behind a Service is called through the management API server's service
// proxy) and previews each machine by asking what CAPI will ask: CanUpdateMachineSet for a
// MachineDeployment's change and CanUpdateMachine per machine, in CAPI's wire types; the pure
// planner in internal/inplace turns the answers into in place (by which extension) or replaced
// (which fields force it), and the MachineDeployment's maxSurge is taken into account. Like
// Cluster API v1.14, it allows one extension per in-place hook: with several, CAPI stops the
// rollout, and the machines are blocked.
//
// It reads and previews; it writes nothing (a ClusterClass-built Cluster's topology variables
// are checked with a server-side dry run). Reader reads the same state for a refresh, calling
// no extension, and for the waits of package ownerupdate, which carries the plans out.
//
// A Cluster built from a ClusterClass (spec.topology) is upgraded through its topology, never
// by writing an owner its topology controller manages (those are refused): PlanFleet, with the
// control plane selected, previews the control plane and every MachineDeployment the topology
// made, in the order the topology controller upgrades them, as if each got the version
// (topology.go); ownerupdate writes spec.topology.version to the Cluster.
//
// It knows nothing of Terraform; errors meant for the person running it are usererr.Errors.
package owners
