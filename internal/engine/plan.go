package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Action is what a plan intends to do with one target.
type Action string

const (
	// ActionApply applies the desired revision in the target's wave.
	ActionApply Action = "apply"
	// ActionSkip leaves the target alone; Intent.Reason says why.
	ActionSkip Action = "skip"
	// ActionAlreadyCurrent leaves a target that already runs the revision.
	ActionAlreadyCurrent Action = "already-current"
	// ActionRestore restores a target an earlier run left while applying
	// some other revision (or while rolling it back) to its backup, before
	// the waves start. If the backup is not the desired revision the target
	// is then applied in its wave like any other.
	//
	// A target an earlier run left while applying the desired revision is
	// not merely verified: it gets ActionApply, because the earlier run may
	// have stopped before creating every object or pruning the previous
	// revision's (server-side apply is idempotent, so applying again is
	// safe).
	ActionRestore Action = "restore"
)

// Intent is the plan for one target.
type Intent struct {
	Action Action
	// Reason explains a skip or an interruption ("" otherwise).
	Reason string
	// RestoreTo is the revision the target returns to if its change fails
	// or is rolled back ("" = remove what the rollout applied).
	RestoreTo string
	// Current is the revision recorded current on the target at plan time.
	Current string
	// Provisioning is the revision an earlier run left the target applying
	// ("" when it left the target settled).
	Provisioning string
	// Wave is the 1-based wave that applies the desired revision to the
	// target, or 0 when no wave does.
	Wave int
	// Canary is set for targets listed in Policy.Canary.
	Canary bool
	// Stage is the 1-based index in Plan.Stages of the target's stage, 0 for a canary and
	// when the rollout has no stages (or the target is in none).
	Stage int
}

// PlanStage is one stage of Policy.Stages as planned, its limits resolved.
type PlanStage struct {
	Name string
	// Eligible counts the stage's targets that are not skipped; its percentages resolve
	// against it.
	Eligible    int
	UpdateLimit int
	MaxFailures int
	BakeTime    time.Duration
	// Waves counts the stage's waves.
	Waves int
	// Waiting lists the stage's targets that would change but wait for a later promotion
	// (they are after Policy.PromoteUntil).
	Waiting []string
}

// Plan is what PlanRollout decided. Execute carries it out; resources show
// Waves and Notes at plan time.
type Plan struct {
	// Desired is the revision being rolled out.
	Desired string
	// Eligible counts targets that are not skipped; percentages resolve
	// against it.
	Eligible int
	// UpdateLimit is the resolved number of targets changed at once.
	UpdateLimit int
	// MaxFailures is the resolved number of failures tolerated before no
	// new wave starts.
	MaxFailures int
	// MaxUnsettled is the resolved number of targets that may stop answering after their change
	// began (StatusLostContact) before no new wave starts.
	MaxUnsettled int
	// Order lists every target once: canary targets first in the order
	// given, then the rest sorted by name.
	Order []string
	// Resume lists the targets to restore before the first wave (intent
	// ActionRestore), in Order, at most UpdateLimit at a time.
	Resume []string
	// Waves lists, in order, the targets each wave applies the desired
	// revision to. No wave holds more than UpdateLimit targets, and canary
	// targets have waves of their own (the first CanaryWaves).
	Waves [][]string
	// CanaryWaves is how many leading waves hold canary targets.
	CanaryWaves int
	// Intents holds the intent for every target in Order.
	Intents map[string]Intent
	// Invalid lists the targets whose records show Desired as invalid.
	Invalid []Invalidity
	// UnknownCanaries lists canary names that are not among the targets.
	UnknownCanaries []string
	// Duplicates lists target names given more than once; the first wins.
	Duplicates []string
	// Stages are Policy.Stages as planned (nil without stages). Their waves follow the canary
	// waves, in stage order.
	Stages []PlanStage
	// PromoteUntil is Policy.PromoteUntil: the last stage this plan carries the revision to.
	PromoteUntil string
	// Unstaged lists the targets that would change but are in no stage (left alone).
	Unstaged []string
	// Notes are short human-readable lines describing the plan.
	Notes []string
	// Differences says, for a plan made by Follow, where it departs from the plan it follows.
	Differences []string
}

// Changes reports whether executing the plan would touch any target.
func (p Plan) Changes() bool { return len(p.Resume) > 0 || len(p.Waves) > 0 }

// PlanRollout decides how to roll desired out to targets under policy. It
// is pure and deterministic: the same input gives the same plan, so the plan
// Terraform shows is the plan Execute carries out. desired must not be "":
// records use "" for "nothing", so removal cannot be recorded as a rollout.
// Call policy.Validate first; PlanRollout itself never fails.
func PlanRollout(targets []Target, desired string, policy Policy) Plan {
	p := Plan{Desired: desired, Intents: make(map[string]Intent, len(targets)), PromoteUntil: policy.PromoteUntil}
	byName := p.indexTargets(targets)
	p.UpdateLimit = max(policy.UpdateLimit.Resolve(p.Eligible), 1)
	p.MaxFailures = policy.MaxFailures.Resolve(p.Eligible)
	p.MaxUnsettled = policy.MaxUnsettled.Resolve(p.Eligible)

	canary := p.orderCanaries(policy.Canary, byName)
	stageOf := stageMembers(policy, byName, canary)
	groups := stageGroups(byName, canary, stageOf, len(policy.Stages))
	// After the canaries, each stage's targets, then those in no stage.
	for _, g := range groups[1:] {
		p.Order = append(p.Order, g...)
	}
	p.Order = append(p.Order, groups[0]...)
	p.Stages = planStages(policy.Stages, groups, byName)

	changing := p.decideIntents(byName, canary, stageOf, policy)
	p.cutWaves(changing)
	p.Invalid = KnownInvalid(targets, desired)
	p.Notes = notes(&p, policy)
	return p
}

// indexTargets maps targets by name, the first of a name winning (later ones are listed in
// p.Duplicates), and counts in p.Eligible those not skipped.
func (p *Plan) indexTargets(targets []Target) map[string]*Target {
	byName := make(map[string]*Target, len(targets))
	for i := range targets {
		t := &targets[i]
		if _, dup := byName[t.Name]; dup {
			p.Duplicates = append(p.Duplicates, t.Name)
			continue
		}
		byName[t.Name] = t
		if t.SkipReason == "" {
			p.Eligible++
		}
	}
	return byName
}

// orderCanaries starts p.Order with the canary targets in the order the user gave (that order
// is the point of listing them), each once, and returns the set of them. Canary names that are
// not targets go to p.UnknownCanaries.
func (p *Plan) orderCanaries(names []string, byName map[string]*Target) map[string]bool {
	p.Order = make([]string, 0, len(byName))
	canary := make(map[string]bool, len(names))
	for _, name := range names {
		if canary[name] {
			continue
		}
		if _, ok := byName[name]; !ok {
			p.UnknownCanaries = append(p.UnknownCanaries, name)
			continue
		}
		canary[name] = true
		p.Order = append(p.Order, name)
	}
	return canary
}

// stageGroups returns the targets that are not canaries grouped by stage, each group sorted by
// name: groups[i] holds stage i's (1-based), groups[0] those in no stage.
func stageGroups(byName map[string]*Target, canary map[string]bool, stageOf map[string]int, stages int) [][]string {
	groups := make([][]string, stages+1)
	for name := range byName {
		if !canary[name] {
			groups[stageOf[name]] = append(groups[stageOf[name]], name)
		}
	}
	for i := range groups {
		slices.Sort(groups[i])
	}
	return groups
}

// planStages resolves each stage's limits against the stage's own eligible targets (groups[i+1]
// for stage i), so that a percentage means a share of the stage, not of the fleet.
func planStages(stages []Stage, groups [][]string, byName map[string]*Target) []PlanStage {
	var out []PlanStage
	for i, st := range stages {
		ps := PlanStage{Name: st.Name, BakeTime: max(st.BakeTime, 0)}
		for _, name := range groups[i+1] {
			if byName[name].SkipReason == "" {
				ps.Eligible++
			}
		}
		ps.UpdateLimit = max(st.UpdateLimit.Resolve(ps.Eligible), 1)
		ps.MaxFailures = st.MaxFailures.Resolve(ps.Eligible)
		out = append(out, ps)
	}
	return out
}

// waveMembers are the targets a plan applies the desired revision to, before they are cut into
// waves: the canaries, and the rest by stage (byStage[i] for stage i, 1-based; byStage[0] for
// those in no stage, which is every one when the rollout has no stages).
type waveMembers struct {
	canary  []string
	byStage [][]string
}

// decideIntents sets p.Intents for every target in p.Order, lists the targets to restore in
// p.Resume and those held back (in p.Unstaged or their stage's Waiting), and returns the
// targets the waves are to apply the desired revision to.
func (p *Plan) decideIntents(byName map[string]*Target, canary map[string]bool, stageOf map[string]int, policy Policy) waveMembers {
	// lastStage (1-based) is the last stage this plan carries the revision to: promote_until's,
	// or the last of all.
	lastStage := len(policy.Stages)
	if i := policy.stageIndex(policy.PromoteUntil); i >= 0 {
		lastStage = i + 1
	}
	changing := waveMembers{canary: []string{}, byStage: make([][]string, len(policy.Stages)+1)}
	for _, name := range p.Order {
		in := intentFor(byName[name], p.Desired, policy.Irreversible)
		in.Canary = canary[name]
		if !in.Canary {
			in.Stage = stageOf[name]
		}
		held := heldReason(in, policy, lastStage)
		switch {
		case in.Action == ActionRestore:
			p.Resume = append(p.Resume, name)
			// Restoring settles the target when the backup is the desired revision, and a
			// refused target is only restored: neither has a wave to wait for.
			if in.RestoreTo == p.Desired || byName[name].Refused != "" {
				p.Intents[name] = in
				continue
			}
		case in.Action != ActionApply:
			p.Intents[name] = in
			continue
		}
		if held != "" {
			p.hold(name, in, held)
			continue
		}
		p.Intents[name] = in
		if in.Canary {
			changing.canary = append(changing.canary, name)
		} else {
			changing.byStage[in.Stage] = append(changing.byStage[in.Stage], name)
		}
	}
	return changing
}

// heldReason says why a target that would change waits: after the stage promoted to (lastStage,
// 1-based), or in no stage at all. "" when it does not wait: canaries and rollouts without
// stages never do.
func heldReason(in Intent, policy Policy, lastStage int) string {
	switch {
	case in.Canary || len(policy.Stages) == 0:
		return ""
	case in.Stage == 0:
		return "in no stage"
	case in.Stage > lastStage:
		return fmt.Sprintf("waits for stage %s (promote_until = %q)", policy.Stages[in.Stage-1].Name, policy.PromoteUntil)
	}
	return ""
}

// hold records the intent of a target that would change but waits (held says why), and lists
// it in p.Unstaged or its stage's Waiting. Only its change waits: an interrupted run is still
// settled, so a restore keeps its action.
func (p *Plan) hold(name string, in Intent, held string) {
	if in.Action == ActionApply {
		in.Action, in.Reason = ActionSkip, held
	}
	p.Intents[name] = in
	if in.Stage == 0 {
		p.Unstaged = append(p.Unstaged, name)
	} else {
		p.Stages[in.Stage-1].Waiting = append(p.Stages[in.Stage-1].Waiting, name)
	}
}

// cutWaves cuts the changing targets into p.Waves (canaries first, each at most
// p.UpdateLimit; then each stage's, at most the stage's limit; then those in no stage) and
// gives each target's intent its wave.
func (p *Plan) cutWaves(changing waveMembers) {
	p.Waves = append(p.Waves, chunk(changing.canary, p.UpdateLimit)...)
	p.CanaryWaves = len(p.Waves)
	for i := range p.Stages {
		w := chunk(changing.byStage[i+1], p.Stages[i].UpdateLimit)
		p.Stages[i].Waves = len(w)
		p.Waves = append(p.Waves, w...)
	}
	p.Waves = append(p.Waves, chunk(changing.byStage[0], p.UpdateLimit)...)
	for i, wave := range p.Waves {
		for _, name := range wave {
			in := p.Intents[name]
			in.Wave = i + 1
			p.Intents[name] = in
		}
	}
}

// stageMembers maps each target (not a canary) of byName to the 1-based index of the first stage
// of policy listing it; a target in no stage is absent (0).
func stageMembers(policy Policy, byName map[string]*Target, canary map[string]bool) map[string]int {
	out := map[string]int{}
	for i, st := range policy.Stages {
		for _, name := range st.Members {
			if _, ok := byName[name]; ok && !canary[name] && out[name] == 0 {
				out[name] = i + 1
			}
		}
	}
	return out
}

func intentFor(t *Target, desired string, irreversible bool) Intent {
	in := intentAction(t, desired)
	if irreversible && in.Action == ActionRestore {
		// Nothing is restored: an interrupted change (of whatever revision) is settled by
		// applying the desired one, which replaces the owner's desired state again.
		in = Intent{Action: ActionApply, Reason: "interrupted while applying " + t.Record.Provisioning + "; applied again"}
	}
	in.Current = t.Record.Current
	in.Provisioning = t.Record.Provisioning
	return in
}

func intentAction(t *Target, desired string) Intent {
	rec := t.Record
	switch {
	case t.SkipReason != "" && rec.Provisioning != "":
		// Say so: the target stays unsettled until it can be reached.
		return Intent{Action: ActionSkip, Reason: t.SkipReason + " (left while applying " + rec.Provisioning + "; settled once reachable)", RestoreTo: rec.Backup}
	case t.SkipReason != "":
		return Intent{Action: ActionSkip, Reason: t.SkipReason}
	case t.Refused != "" && rec.Provisioning != "" && rec.Backup != desired:
		return Intent{Action: ActionRestore, Reason: "interrupted while applying " + rec.Provisioning + "; " + t.Refused, RestoreTo: rec.Backup}
	case t.Refused != "" && rec.Current == desired && rec.Provisioning == "":
		return Intent{Action: ActionAlreadyCurrent}
	case t.Refused != "":
		return Intent{Action: ActionSkip, Reason: t.Refused}
	case rec.Provisioning != "" && rec.RollingBack && rec.Backup != desired:
		// Finish what the earlier run decided: it was undoing Provisioning.
		return Intent{Action: ActionRestore, Reason: "interrupted while rolling back " + rec.Provisioning, RestoreTo: rec.Backup}
	case rec.Provisioning != "" && (rec.Provisioning == desired || rec.Backup == desired):
		// Applying the desired revision again settles the target either way: its objects are
		// applied (the earlier run may have stopped before creating them all) and whatever the
		// interrupted revision added is pruned. The provisioning record carried the restore
		// point, so Backup (not Current) is where a failure returns to.
		return Intent{Action: ActionApply, Reason: "interrupted while applying " + rec.Provisioning + "; applied again", RestoreTo: rec.Backup}
	case rec.Provisioning != "":
		return Intent{Action: ActionRestore, Reason: "interrupted while applying " + rec.Provisioning, RestoreTo: rec.Backup}
	case rec.Current == desired && t.Drifted:
		// Repairing drift re-applies the current revision; if that fails,
		// the cluster returns to the revision before it, as for any change.
		return Intent{Action: ActionApply, Reason: "drifted from " + desired, RestoreTo: rec.Backup}
	case rec.Current == desired:
		return Intent{Action: ActionAlreadyCurrent}
	default:
		return Intent{Action: ActionApply, RestoreTo: rec.Current}
	}
}

// chunk cuts names into consecutive slices of at most n. The slices share
// names' backing array; callers never append to them.
func chunk(names []string, n int) [][]string {
	if len(names) == 0 {
		return nil
	}
	out := make([][]string, 0, (len(names)+n-1)/n)
	for len(names) > n {
		out = append(out, names[:n:n])
		names = names[n:]
	}
	return append(out, names)
}

func notes(p *Plan, policy Policy) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	total := len(p.Order)
	add("%s to %d eligible of %s: up to %d at a time (update_limit %s), tolerating %s (max_failures %s)",
		p.Desired, p.Eligible, plural(total, "target"), p.UpdateLimit, policy.UpdateLimit, plural(p.MaxFailures, "failure"), policy.MaxFailures)
	for _, name := range p.Duplicates {
		add("duplicate target %s: ignored", name)
	}
	for _, name := range p.UnknownCanaries {
		add("canary %s: not among the targets", name)
	}
	for _, inv := range p.Invalid {
		add("%s recorded invalid on %s: %s", p.Desired, inv.Target, inv.Reason)
	}
	for _, name := range p.Resume {
		in := p.Intents[name]
		add("resume %s: restore to %s (%s)", name, show(in.RestoreTo), in.Reason)
	}
	for _, name := range p.Order {
		if in := p.Intents[name]; in.Action == ActionApply && in.Provisioning != "" {
			add("resume %s: %s", name, in.Reason)
		}
	}
	for i, wave := range p.Waves {
		add("wave %d/%d%s: %s", i+1, len(p.Waves), p.waveLabel(i), strings.Join(wave, ", "))
	}
	for _, st := range p.Stages {
		add("stage %s: %s of up to %d, tolerating %s, bake %s", st.Name, plural(st.Waves, "wave"), st.UpdateLimit, plural(st.MaxFailures, "failure"), st.BakeTime)
	}
	if text := p.StagesText(); text != "" {
		add("%s", text)
	}
	// The targets that wait for a stage are counted above, not listed: there can be hundreds.
	waiting := map[string]bool{}
	for _, name := range p.Unstaged {
		waiting[name] = true
	}
	for _, st := range p.Stages {
		for _, name := range st.Waiting {
			waiting[name] = true
		}
	}
	var current []string
	for _, name := range p.Order {
		in := p.Intents[name]
		switch {
		case in.Action == ActionAlreadyCurrent:
			current = append(current, name)
		case in.Action == ActionSkip && !waiting[name]:
			add("skip %s: %s", name, in.Reason)
		}
	}
	if len(current) > 0 {
		add("already on %s: %s", p.Desired, strings.Join(current, ", "))
	}
	if !p.Changes() {
		add("nothing to do")
	}
	return out
}

// StagesText says, in one line whatever the fleet's size, which targets this plan leaves for a
// later promotion: "stops after stage eu: 120 clusters wait for stages us, ap", and those in no
// stage. "" when nothing waits.
func (p Plan) StagesText() string {
	var parts []string
	waiting, stages := 0, []string{}
	for _, st := range p.Stages {
		if len(st.Waiting) > 0 {
			waiting += len(st.Waiting)
			stages = append(stages, st.Name)
		}
	}
	if waiting > 0 {
		word := "stage"
		if len(stages) > 1 {
			word = "stages"
		}
		verb := "waits"
		if waiting > 1 {
			verb = "wait"
		}
		parts = append(parts, fmt.Sprintf("stops after stage %s: %s %s for %s %s", p.PromoteUntil, plural(waiting, "cluster"), verb, word, strings.Join(stages, ", ")))
	}
	if n := len(p.Unstaged); n > 0 {
		verb := "is"
		if n > 1 {
			verb = "are"
		}
		parts = append(parts, fmt.Sprintf("%s in no stage %s left alone", plural(n, "cluster"), verb))
	}
	return strings.Join(parts, "; ")
}

// show names a revision in messages; the empty revision is "nothing
// installed", which a bare "" would hide.
func show(rev string) string {
	if rev == "" {
		return "(none)"
	}
	return rev
}

// Follow returns p cut down to the waves an earlier plan showed (planned, e.g. the waves
// `terraform plan` displayed), so that apply does what the reviewed plan said and nothing else:
//
//   - targets keep the waves planned gave them, in that order (p's own waves, resolved against
//     a fleet that may have changed since, are discarded);
//   - a target p would change but planned did not name (a cluster that joined or drifted
//     since) is skipped, to be picked up by the next plan;
//   - a target planned named but that p would not change any more (it became not ready,
//     vanished, or already runs the revision) is left out of its wave.
//
// Notes say what differs. Resume keeps only planned targets. The limits stay p's. Build p
// from targets whose planned ones are marked Drifted, so that a target planned to be repaired
// is applied even if it looks current now.
func (p Plan) Follow(planned [][]string, policy Policy) Plan {
	inPlan := map[string]bool{}
	for _, wave := range planned {
		for _, name := range wave {
			inPlan[name] = true
		}
	}
	changing := map[string]bool{}
	for _, wave := range p.Waves {
		for _, name := range wave {
			changing[name] = true
		}
	}
	out := p
	out.Intents = make(map[string]Intent, len(p.Intents))
	for name, in := range p.Intents {
		in.Wave = 0
		out.Intents[name] = in
	}
	var differences []string
	out.Waves = nil
	for _, wave := range planned {
		var kept []string
		for _, name := range wave {
			in, known := p.Intents[name]
			switch {
			case !known:
				differences = append(differences, fmt.Sprintf("planned %s: no longer picked; left out", name))
			case !changing[name]:
				why := string(in.Action)
				if in.Reason != "" {
					why += ": " + in.Reason
				}
				differences = append(differences, fmt.Sprintf("planned %s: now %s; left out", name, why))
			default:
				kept = append(kept, name)
			}
		}
		if len(kept) == 0 {
			continue
		}
		out.Waves = append(out.Waves, kept)
		for _, name := range kept {
			in := out.Intents[name]
			in.Wave = len(out.Waves)
			out.Intents[name] = in
		}
	}
	for _, name := range p.Order {
		if changing[name] && !inPlan[name] {
			in := out.Intents[name]
			in.Action, in.Reason = ActionSkip, "not in the plan being applied; the next plan includes it"
			out.Intents[name] = in
			differences = append(differences, fmt.Sprintf("%s: not in the plan being applied; left for the next apply", name))
		}
	}
	out.Resume = nil
	for _, name := range p.Resume {
		if inPlan[name] {
			out.Resume = append(out.Resume, name)
		} else if in := out.Intents[name]; in.Action == ActionRestore {
			in.Action, in.Reason = ActionSkip, "not in the plan being applied; the next plan includes it"
			out.Intents[name] = in
		}
	}
	out.CanaryWaves = 0
	for _, wave := range out.Waves {
		if !out.Intents[wave[0]].Canary {
			break
		}
		out.CanaryWaves++
	}
	out.Differences = differences
	out.Notes = append(notes(&out, policy), differences...)
	return out
}
