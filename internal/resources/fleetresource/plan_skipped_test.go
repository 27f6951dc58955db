package fleetresource

import (
	"fmt"
	"strings"
	"testing"
)

// Up to twenty skipped clusters are named one per line; at a thousand the warning groups them by
// reason (a paused region, a window shared by many clusters) and stays a few lines long.
func TestSkippedDetailGroupsAtScale(t *testing.T) {
	few := map[string]string{"a": "paused by the gradual.dev/paused annotation: incident", "b": "control plane is not initialized"}
	if got := SkippedDetail("intro:", few); !strings.Contains(got, "  - a: paused") || !strings.Contains(got, "  - b: control plane") {
		t.Errorf("few: %q", got)
	}
	many := map[string]string{}
	for i := range 1000 {
		name := fmt.Sprintf("c%04d", i)
		switch {
		case i < 600:
			many[name] = "outside its maintenance window (gradual.dev/maintenance-window) 0 2 * * * for 4h (UTC): opens next at 2026-11-27 02:00 UTC"
		case i < 900:
			many[name] = "paused by the gradual.dev/paused annotation: eu migration"
		default:
			many[name] = fmt.Sprintf("reason %d", i) // 100 distinct reasons
		}
	}
	got := SkippedDetail("intro:", many)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) > 12 {
		t.Errorf("%d lines at 1,000 skipped clusters, want at most 12:\n%s", len(lines), got)
	}
	if !strings.HasPrefix(lines[1], "  - 600 cluster(s) c0000, c0001, c0002, c0003, c0004 and 595 more: outside its maintenance window") {
		t.Errorf("the largest group first, with a count and the first names: %q", lines[1])
	}
	if !strings.Contains(lines[2], "300 cluster(s)") || !strings.Contains(lines[2], "eu migration") {
		t.Errorf("second group: %q", lines[2])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "92 more cluster(s) for 92 other reason(s)") {
		t.Errorf("the rest counted: %q", last)
	}
}
