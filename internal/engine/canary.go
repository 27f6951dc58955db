package engine

// CanaryGap is a listed canary that the plan's canary waves do not hold, and why.
type CanaryGap struct {
	Name   string
	Reason string
}

// CanaryGaps lists the canaries of policy that are not in p's canary waves while p has waves
// to run: without them the first wave would go straight to the rest of the fleet, which is what
// listing canaries is meant to prevent. A canary that already runs the desired revision is no
// gap: the revision was applied and verified there by an earlier apply, which is the proof the
// canary wave exists to give. Nil when policy.CanaryOptional, when no canary is listed, or when
// p runs no wave. Works on plans made by PlanRollout and by Follow alike, so that apply can
// check again what plan checked.
func (p Plan) CanaryGaps(policy Policy) []CanaryGap {
	if policy.CanaryOptional || len(policy.Canary) == 0 || len(p.Waves) == 0 {
		return nil
	}
	var gaps []CanaryGap
	seen := map[string]bool{}
	for _, name := range policy.Canary {
		if seen[name] {
			continue
		}
		seen[name] = true
		in, known := p.Intents[name]
		switch {
		case !known:
			gaps = append(gaps, CanaryGap{name, "not a cluster this rollout picks (no such Cluster, or the selector does not match it)"})
		case in.Wave >= 1 && in.Wave <= p.CanaryWaves:
			// In a canary wave: what it is for.
		case in.Action == ActionAlreadyCurrent:
			// Proven on it already (see above).
		case in.Reason != "":
			gaps = append(gaps, CanaryGap{name, string(in.Action) + ": " + in.Reason})
		default:
			gaps = append(gaps, CanaryGap{name, string(in.Action)})
		}
	}
	return gaps
}
