package records

import (
	"strings"
	"testing"
)

// TestFieldManager: every key applies with a field manager of its own, which names it and
// reads back; one too long for the API server is shortened to exactly the limit, stays unique
// and ours, and is described without a key.
func TestFieldManager(t *testing.T) {
	k := Key{Kind: "rollout", Namespace: "fleet", Name: "web"}
	if got := k.FieldManager(); got != "gradual/rollout/fleet/web" {
		t.Fatalf("FieldManager = %q", got)
	}
	if back, ok := ParseFieldManager(k.FieldManager()); !ok || back != k {
		t.Errorf("ParseFieldManager(%q) = %v, %v", k.FieldManager(), back, ok)
	}
	if got := DescribeFieldManager(k.FieldManager()); got != "rollout fleet/web" {
		t.Errorf("DescribeFieldManager = %q", got)
	}
	if !IsFieldManager(k.FieldManager()) || !IsFieldManager(LegacyFieldManager) || IsFieldManager("kubectl-edit") || IsFieldManager("gradualist") {
		t.Error("IsFieldManager tells ours from others wrongly")
	}
	for _, m := range []string{LegacyFieldManager, "kubectl-edit", "gradual/rollout/fleet", "gradual/a/b/c/d"} {
		if _, ok := ParseFieldManager(m); ok {
			t.Errorf("ParseFieldManager(%q) read a key", m)
		}
	}
	if got := DescribeFieldManager("flux"); got != `field manager "flux"` {
		t.Errorf("DescribeFieldManager(flux) = %q", got)
	}

	long := Key{Kind: "module", Namespace: strings.Repeat("n", 63), Name: strings.Repeat("a", 63) + "." + strings.Repeat("m", 40)}
	other := long
	other.Name += "x"
	m := long.FieldManager()
	switch {
	case len(m) != MaxFieldManagerLength:
		t.Errorf("shortened manager is %d characters, want %d: %q", len(m), MaxFieldManagerLength, m)
	case m != long.FieldManager():
		t.Error("FieldManager is not deterministic")
	case m == other.FieldManager():
		t.Errorf("two long keys share manager %q", m)
	case !strings.HasPrefix(m, "gradual/module/"+long.Namespace) || !strings.HasSuffix(m, "~"+long.Hash()):
		t.Errorf("shortened manager %q: want its beginning and ~hash", m)
	case !IsFieldManager(m):
		t.Errorf("IsFieldManager(%q) = false", m)
	}
	if _, ok := ParseFieldManager(m); ok {
		t.Errorf("ParseFieldManager read a key from shortened %q", m)
	}
	if got := DescribeFieldManager(m); !strings.Contains(got, "another rollout or module assignment") || !strings.Contains(got, m) {
		t.Errorf("DescribeFieldManager(shortened) = %q", got)
	}
}
