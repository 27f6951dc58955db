package assignment

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// Moving an assignment between engines (direct delivery to Flux, and back) is delivery's move
// (delivery.Service.MovingFrom, internal/delivery/move.go) carried out module by module: the run
// takes the modules in depends_on order as it always does, each through a run of its own on the
// moving service, so each module moves wave by wave, its new engine delivering the same content
// and verifying it before the old engine lets go of it there (nothing pruned, nothing deleted).
// A module's revision names the engine's pull settings (delivery.RevisionSettings), so in
// Reconcile mode a move is a new revision of every module on every cluster; ApplyOnce re-applies
// nothing it applied already, so there the clusters the old engine still holds are applied again
// (heldByPrevious), as long as they keep the module's configured version (bound to its revision
// under the old engine, Module.MovedFromRevision): what they kept of an older one the provider no
// longer has, and cannot pin on the new engine (MovesOld, refused).

// heldByPrevious says whether the engine the assignment moves from still holds module on
// cluster, as the module's observation read it (delivery.Observation.Previous).
func (o *Observation) heldByPrevious(module, cluster string) bool {
	if mo := o.Modules[module]; mo != nil {
		_, held := mo.Previous[cluster]
		return held
	}
	return false
}

// Moving counts, over every module, the (module, cluster) pairs the engine the assignment moves
// from is still in charge of (delivery.Observation.Moving): what the plan's warning counts.
func (o *Observation) Moving() int {
	n := 0
	for _, mo := range o.Modules {
		n += len(mo.Moving)
	}
	return n
}

// MoveDone says whether a move between engines is over as o reads the fleet: every module was
// read by the moving service (its Previous is set), and none is still held by the engine moved
// from on any cluster, nor skipped on one (a skipped cluster may still be held: the move goes on
// until it is read). False when o was not read while moving.
func (o *Observation) MoveDone() bool {
	if o == nil || len(o.Skipped) > 0 {
		return false
	}
	for _, mo := range o.Modules {
		if mo == nil || mo.Previous == nil || len(mo.Previous) > 0 || len(mo.Skipped) > 0 {
			return false
		}
	}
	return true
}

// withPrevious copies what the live observation obs read of the engine moved from into planned
// (the plan made from the state, ObservationFrom, which holds no such thing), so that the plan
// decides as apply will.
func withPrevious(planned, obs *Observation) {
	for name, mo := range planned.Modules {
		if live := obs.Modules[name]; live != nil && mo != nil {
			mo.Previous, mo.Moving = live.Previous, live.Moving
		}
	}
}

// movesOldRefusal refuses a move that would give clusters another version of a module than the
// one they kept (ApplyOnce, PlanAssignment's MovesOld); nil when there is none.
func movesOldRefusal(p BindingPlan, spec Spec) error {
	if len(p.MovesOld) == 0 {
		return nil
	}
	var lines []string
	for _, name := range sortedNames(p.MovesOld) {
		m, _ := spec.Module(name)
		lines = append(lines, fmt.Sprintf("module %s (version %s): %s", name, m.Version, strings.Join(p.MovesOld[name], ", ")))
	}
	return fmt.Errorf("with mode = \"ApplyOnce\" these clusters keep an older version of a module than the configured one, which the "+
		"provider no longer holds, so the engine the assignment moves to cannot be given the same content:\n  %s\n"+
		"Keep `delivery` as it is until they run the configured version",
		strings.Join(lines, "\n  "))
}

// moveLines says, per module, what the run's move between engines did (delivery's
// RunResult.Moved and MoveFailures): the clusters whose old engine let go, and where it did not
// yet. Empty when the module's run moved nothing.
func moveLines(module string, out *delivery.RunResult) (moved, failures []string) {
	if len(out.Moved) > 0 {
		sorted := slices.Sorted(slices.Values(out.Moved))
		moved = append(moved, fmt.Sprintf("module %s: %s", module, strings.Join(sorted, ", ")))
	}
	for _, f := range out.MoveFailures {
		failures = append(failures, fmt.Sprintf("module %s: %s", module, f))
	}
	return moved, failures
}
