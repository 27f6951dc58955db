// Package fleetupdate plans and carries out an in-place update of machines over a fleet of
// Cluster API clusters (gradual_inplace_update's names/selector form), through the engine like
// the rollout (delivery) and the module assignment (assignment): a target is a cluster. The
// single-owner form (one owner of one cluster, Spec.Owner) goes through the same Plan and Apply,
// without waves; its Apply refuses a plan gone stale since Terraform showed it (StaleError).
//
// The plan is the contract. Plan cuts the waves from what the refresh before it recorded of each
// cluster (Prior) when the configuration picks the same clusters, so the values Terraform shows
// are a pure function of configuration and state and come out the same when Terraform plans
// again during apply; the live preview (which machines Cluster API updates in place, which it
// replaces) is shown beside it. Apply carries out exactly the planned waves (engine.Plan.Follow):
// a cluster the plan did not name is not touched, a planned cluster no longer picked is left
// alone and reported. Before each wave it asks the extensions again for that wave's machines; a
// wave whose preview changed since the plan (a machine planned in place now replaced, an
// extension gone, a machine now blocked) stops the run with the difference named, before
// anything of that wave is written.
package fleetupdate
