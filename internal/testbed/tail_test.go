package testbed

import (
	"strings"
	"testing"
)

func TestTailKeepsTheLastLinesAndCutsLongOnes(t *testing.T) {
	long := "E1127 command failed err=" + strings.Repeat("[+]poststarthook ok\\n", 300)
	got := tail("first\nsecond\nthird\n"+long+"\n", 2)
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || lines[0] != "third" {
		t.Fatalf("tail kept %q, want the last two lines", lines)
	}
	if !strings.HasPrefix(lines[1], "E1127 command failed") || len(lines[1]) > maxTailLine+len(" …") || !strings.HasSuffix(lines[1], " …") {
		t.Errorf("a %d-byte line became %d bytes: %q", len(long), len(lines[1]), lines[1])
	}
}
