package engine

import (
	"fmt"
	"strings"
	"testing"
)

func TestWavesText(t *testing.T) {
	p := Plan{
		UpdateLimit: 2, CanaryWaves: 1,
		Waves:   [][]string{{"c1"}, {"c2", "c3"}},
		Intents: map[string]Intent{"c3": {Provisioning: "r1"}},
	}
	want := "2 wave(s) of up to 2 cluster(s), each verified before the next:\n" +
		"  wave 1 (canary): c1\n" +
		"  wave 2: c2, c3 (an earlier apply did not see c3 through; applied again)"
	if got := p.WavesText("each verified before the next"); got != want {
		t.Errorf("WavesText =\n%s\nwant\n%s", got, want)
	}
	if got := p.WavesText(""); !strings.HasPrefix(got, "2 wave(s) of up to 2 cluster(s):\n") {
		t.Errorf("WavesText(\"\") = %q, want the heading without a how", got)
	}
}

func TestWavesTextStaysShortAtAThousandClusters(t *testing.T) {
	p := Plan{UpdateLimit: 20}
	for w := range 50 {
		var wave []string
		for c := range 20 {
			wave = append(wave, fmt.Sprintf("c-%04d", w*20+c))
		}
		p.Waves = append(p.Waves, wave)
	}
	got := p.WavesText("")
	if lines := strings.Count(got, "\n") + 1; lines != 12 {
		t.Errorf("WavesText of 50 waves has %d lines, want 12 (heading, 10 waves, the rest counted):\n%s", lines, got)
	}
	if !strings.Contains(got, "  wave 1: c-0000, c-0001, c-0002, c-0003, c-0004, c-0005, c-0006, c-0007, c-0008, c-0009 and 10 more\n") ||
		!strings.HasSuffix(got, "\n  … and 40 more wave(s)") {
		t.Errorf("WavesText of 50 waves of 20:\n%s", got)
	}
}
