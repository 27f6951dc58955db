package acctest

import "testing"

func TestRunsOnLane(t *testing.T) {
	for _, tc := range []struct {
		env  string
		lane int
		want bool
		bad  bool
	}{
		{env: "", lane: 1, want: true},
		{env: "0/2", lane: 0, want: true},
		{env: "0/2", lane: 1, want: false},
		{env: "1/2", lane: 3, want: true}, // lanes wrap: 3 mod 2
		{env: "1/2", lane: 2, want: false},
		{env: "2/2", lane: 0, bad: true},
		{env: "one", lane: 0, bad: true},
	} {
		t.Setenv(LaneEnv, tc.env)
		got, err := RunsOnLane(tc.lane)
		if (err != nil) != tc.bad {
			t.Errorf("%s=%q lane %d: error %v, want error %v", LaneEnv, tc.env, tc.lane, err, tc.bad)
			continue
		}
		if !tc.bad && got != tc.want {
			t.Errorf("%s=%q lane %d: runs %v, want %v", LaneEnv, tc.env, tc.lane, got, tc.want)
		}
	}
}
