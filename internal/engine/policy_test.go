package engine

import (
	"strings"
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the parsed limit; "" when an error is expected
		resolve map[int]int
	}{
		{in: "1", want: "1", resolve: map[int]int{0: 1, 1: 1, 10: 1}},
		{in: "2", want: "2", resolve: map[int]int{1: 2, 10: 2}},
		{in: "02", want: "2"},
		{in: "1%", want: "1%", resolve: map[int]int{0: 1, 1: 1, 100: 1, 101: 2}},
		{in: "25%", want: "25%", resolve: map[int]int{0: 1, 3: 1, 4: 1, 5: 2, 8: 2, 9: 3, 10000: 2500}},
		{in: "33%", want: "33%", resolve: map[int]int{3: 1, 4: 2, 10: 4}},
		{in: "100%", want: "100%", resolve: map[int]int{0: 1, 7: 7}},
		{in: "0"},
		{in: "0%"},
		{in: "101%"},
		{in: "150%"},
		{in: "-1"},
		{in: "+2"},
		{in: "abc"},
		{in: ""},
		{in: "%"},
		{in: " 2 "},
		{in: "2 "},
		{in: "2.5"},
		{in: "2%%"},
		{in: "25 %"},
		{in: "1e3"},
		{in: "99999999999"},
		{in: "２"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLimit(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseLimit(%q) = %v, want an error", tt.in, got)
				}
				for _, part := range []string{`update_limit "` + tt.in + `"`, `whole number ≥ 1 (e.g. "2")`, `percentage from 1% to 100% (e.g. "25%")`} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not say %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLimit(%q): %v", tt.in, err)
			}
			if got.String() != tt.want {
				t.Errorf("ParseLimit(%q) = %s, want %s", tt.in, got, tt.want)
			}
			for eligible, want := range tt.resolve {
				if n := got.Resolve(eligible); n != want {
					t.Errorf("%s.Resolve(%d) = %d, want %d", got, eligible, n, want)
				}
			}
		})
	}
}

func TestParseMaxFailures(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		resolve map[int]int
	}{
		{in: "0", want: "0", resolve: map[int]int{0: 0, 10: 0}},
		{in: "3", want: "3", resolve: map[int]int{1: 3}},
		{in: "0%", want: "0%", resolve: map[int]int{100: 0}},
		{in: "10%", want: "10%", resolve: map[int]int{5: 0, 9: 0, 10: 1, 19: 1, 20: 2}},
		{in: "100%", want: "100%", resolve: map[int]int{7: 7}},
		{in: "150%"},
		{in: "-1"},
		{in: "abc"},
		{in: ""},
		{in: "1.5"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseMaxFailures(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseMaxFailures(%q) = %v, want an error", tt.in, got)
				}
				for _, part := range []string{`max_failures "` + tt.in + `"`, `whole number ≥ 0`, `percentage from 0% to 100%`} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not say %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMaxFailures(%q): %v", tt.in, err)
			}
			if got.String() != tt.want {
				t.Errorf("ParseMaxFailures(%q) = %s, want %s", tt.in, got, tt.want)
			}
			for eligible, want := range tt.resolve {
				if n := got.Resolve(eligible); n != want {
					t.Errorf("%s.Resolve(%d) = %d, want %d", got, eligible, n, want)
				}
			}
		})
	}
}

func TestLimitZeroValues(t *testing.T) {
	if n := (Limit{}).Resolve(10); n != 0 {
		t.Errorf("zero Limit resolves to %d, want 0 (max_failures default)", n)
	}
	if n := UpdateLimitOf(0).Resolve(10); n != 1 {
		t.Errorf("UpdateLimitOf(0) resolves to %d, want 1", n)
	}
	if n := MaxFailuresOf(-3).Resolve(10); n != 0 {
		t.Errorf("MaxFailuresOf(-3) resolves to %d, want 0", n)
	}
	// A zero UpdateLimit must not produce empty waves.
	p := PlanRollout(targets("a", "b"), "r2", Policy{})
	if p.UpdateLimit != 1 || len(p.Waves) != 2 {
		t.Errorf("zero policy: update limit %d, %d waves; want 1 and 2", p.UpdateLimit, len(p.Waves))
	}
}

func TestParseOnFailure(t *testing.T) {
	for _, ok := range []string{"rollback", "halt"} {
		if got, err := ParseOnFailure(ok); err != nil || string(got) != ok {
			t.Errorf("ParseOnFailure(%q) = %q, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"", "Rollback", "stop", " halt"} {
		_, err := ParseOnFailure(bad)
		if err == nil || !strings.Contains(err.Error(), `must be "rollback" or "halt"`) {
			t.Errorf("ParseOnFailure(%q) error = %v", bad, err)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Policy{OnFailure: Halt, Canary: []string{"a", "b"}, BakeTime: time.Second}).Validate(); err != nil {
		t.Errorf("valid policy: %v", err)
	}
	err := Policy{OnFailure: "stop", Canary: []string{"a", "a", ""}, VerifyTimeout: -time.Second}.Validate()
	if err == nil {
		t.Fatal("invalid policy accepted")
	}
	for _, part := range []string{`on_failure "stop"`, `canary "a": listed twice`, "empty target name", "verify timeout -1s"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
}

// FuzzParseLimit checks that parsing never panics, that whatever it accepts
// is written canonically and re-parses to the same limit, and that resolved
// limits stay within their bounds.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"1", "25%", "100%", "0", "0%", "150%", "-1", "abc", "", " 2 ", "2.5", "007%", "2147483648", "%"} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, s string, eligible int) {
		eligible = max(eligible%100000, 0)
		for _, parse := range []struct {
			name   string
			fn     func(string) (Limit, error)
			lowest int
		}{{"update_limit", ParseLimit, 1}, {"max_failures", ParseMaxFailures, 0}} {
			l, err := parse.fn(s)
			if err != nil {
				if !strings.HasPrefix(err.Error(), parse.name+" ") || !strings.Contains(err.Error(), "must be a whole number") {
					t.Fatalf("%s(%q): unhelpful error %q", parse.name, s, err)
				}
				continue
			}
			if strings.Trim(s, "0123456789%") != "" {
				t.Fatalf("%s accepted %q, which has more than digits and %%", parse.name, s)
			}
			again, err := parse.fn(l.String())
			if err != nil || again != l {
				t.Fatalf("%s(%q) = %s, which re-parses to %v, %v", parse.name, s, l, again, err)
			}
			n := l.Resolve(eligible)
			switch {
			case n < parse.lowest:
				t.Fatalf("%s %s.Resolve(%d) = %d, below %d", parse.name, l, eligible, n, parse.lowest)
			case l.IsPercent() && n > max(eligible, parse.lowest):
				t.Fatalf("%s %s.Resolve(%d) = %d, more than the targets", parse.name, l, eligible, n)
			case !l.IsPercent() && n != l.value:
				t.Fatalf("%s %s.Resolve(%d) = %d", parse.name, l, eligible, n)
			}
		}
	})
}
