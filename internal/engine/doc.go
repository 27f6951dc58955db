// Package engine decides and drives the gradual rollout of one revision
// across a set of targets: clusters for rollouts and module assignments,
// machines for in-place updates. It knows nothing of Terraform or Kubernetes;
// it reaches the world through the small World and Clock interfaces, so the
// same engine serves every resource and can be simulated in tests.
//
// Work happens in two steps, as in Cluster API's MachineDeployment rollout
// planner:
//
//  1. PlanRollout is a pure function from the targets (with their skip
//     reasons and recorded state), the desired revision and the Policy to a
//     Plan: the waves, an Intent per target and short human-readable notes.
//     Resources call it at plan time to show what an apply will do, and
//     refuse revisions that KnownInvalid reports.
//  2. Execute drives a Plan: it settles targets an earlier run left
//     half-done, then applies wave after wave (each wave verified and baked
//     before the next starts), restores what fails, stops starting waves
//     once the failure budget is exceeded (rolling back on request), and on
//     cancellation brings in-flight targets to a recorded state. It returns
//     a Result from which resources build state and diagnostics.
//
// Every change to a target is recorded through World.Record before it is
// made, so an interrupted run is always visible to the next plan: that is
// what makes resuming possible and what keeps applied work from going
// unrecorded.
package engine
