package engine

import (
	"fmt"
	"strings"
)

// wavesShown bounds what WavesText lists: waves, and clusters per wave. A plan at 1,000
// clusters stays a few lines long; the full waves are in the resource's `waves` attribute.
const wavesShown = 10

// WavesText describes p's waves for a plan warning, compactly at any fleet size: the first ten
// waves with up to ten targets each, canary waves marked, and the targets an earlier run left
// applying (applied again) named. how, when not empty, says how each wave is carried out and
// follows the heading.
func (p Plan) WavesText(how string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d wave(s) of up to %d cluster(s)", len(p.Waves), p.UpdateLimit)
	if how != "" {
		b.WriteString(", " + how)
	}
	b.WriteString(":")
	for i, wave := range p.Waves {
		if i == wavesShown {
			fmt.Fprintf(&b, "\n  … and %d more wave(s)", len(p.Waves)-wavesShown)
			break
		}
		fmt.Fprintf(&b, "\n  wave %d%s: %s", i+1, p.waveLabel(i), shortList(wave, wavesShown))
		var resumed []string
		for _, n := range wave {
			if p.Intents[n].Provisioning != "" {
				resumed = append(resumed, n)
			}
		}
		if len(resumed) > 0 {
			fmt.Fprintf(&b, " (an earlier apply did not see %s through; applied again)", shortList(resumed, wavesShown))
		}
	}
	if text := p.StagesText(); text != "" {
		b.WriteString("\n  " + text)
	}
	return b.String()
}

// waveLabel marks wave i (0-based) as a canary wave or names its stage.
func (p Plan) waveLabel(i int) string {
	if i < p.CanaryWaves {
		return " (canary)"
	}
	if len(p.Waves[i]) > 0 {
		if st := p.Intents[p.Waves[i][0]].Stage; st > 0 && st <= len(p.Stages) {
			return " (stage " + p.Stages[st-1].Name + ")"
		}
	}
	return ""
}

// shortList joins names, the first shown of them when there are more: "a, b and 3 more".
func shortList(names []string, shown int) string {
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
