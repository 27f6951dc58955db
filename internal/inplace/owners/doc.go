// Package live plans and carries out in-place machine updates against a live management
// cluster: it reads the selected Machines with their infrastructure machines and bootstrap
// configs, finds the update extensions (given explicitly or from CAPI ExtensionConfig objects,
// through their Discovery hook), asks each CanUpdateMachine for every machine and hands the
// answers to the pure planner in internal/inplace. Execute then updates the in-place machines
// in waves through internal/engine: UpdateMachine until done, the desired specs written back,
// the machine's Node verified in the workload cluster.
//
// It knows nothing of Terraform; errors meant for the person running it are usererr.Errors.
package owners
