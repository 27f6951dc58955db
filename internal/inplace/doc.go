// Package inplace plans in-place machine updates the way Cluster API's in-place update
// proposal does, as a pure function of what it is given: no network, no Kubernetes clients, no
// Terraform.
//
// For each machine it takes the current Machine, infrastructure machine and bootstrap config
// (unstructured, as read from the management cluster) and the desired change (a Kubernetes
// version and JSON merge patches of the three specs), works out which spec fields change,
// and, from each update extension's CanUpdateMachine answer (patches to apply to the current
// objects), which extension covers which field. A machine whose changed fields are all covered
// is updated in place; otherwise it is replaced (fallback "rolling") or blocks the plan
// (fallback "none"), naming the fields nothing covers.
//
// Only spec counts, on both sides: extensions may return patches that touch status or
// metadata, and those neither cover anything nor count against a machine. As in CAPI, the
// patches of all answering extensions are applied together to the current objects, and the
// result must equal the desired specs; a patch that changes a field nobody asked to change
// therefore makes the machine uncovered too.
//
// The same planning serves a MachineDeployment's change as a whole (CanUpdateMachineSet: a
// MachineSet and its templates in place of a Machine and its objects), and RotateTemplate makes
// the new template a change needs: Cluster API's templates are never edited in place.
package inplace
