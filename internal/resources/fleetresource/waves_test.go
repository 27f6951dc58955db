package fleetresource

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestWavesText(t *testing.T) {
	thousand := make([]int, 1000)
	for i := range thousand {
		thousand[i] = 1
	}
	for _, tc := range []struct {
		sizes  []int
		canary int
		want   string
	}{
		{nil, 0, "none"},
		{[]int{4}, 0, "1 wave of 4 clusters"},
		{[]int{2, 2, 2}, 0, "3 waves of 2 clusters"},
		{[]int{1, 2, 2}, 1, "3 waves: 1 canary wave of 1 cluster, then 2 waves of 2 clusters"},
		// A canary wave of the same size as the next ones is still told apart.
		{[]int{1, 1, 1}, 1, "3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster"},
		{[]int{1, 1, 3}, 2, "3 waves: 2 canary waves of 1 cluster, then 1 wave of 3 clusters"},
		{[]int{25, 25, 25, 24}, 0, "4 waves: 3 waves of 25 clusters, then 1 wave of 24 clusters"},
		{thousand, 1, "1000 waves: 1 canary wave of 1 cluster, then 999 waves of 1 cluster"},
		{[]int{2}, 5, "1 canary wave of 2 clusters"},
	} {
		if got := WavesText(tc.sizes, tc.canary); got != tc.want {
			t.Errorf("WavesText(%v, %d) = %q, want %q", tc.sizes, tc.canary, got, tc.want)
		}
	}
}

// States from before `waves` was text upgrade: counts, cluster lists (0.1.0) and per-module maps
// become the text; attributes the schema no longer has are dropped.
func TestUpgradeWavesJSON(t *testing.T) {
	attrs := map[string]bool{"id": true, "waves": true}
	for _, tc := range []struct{ in, want string }{
		{`{"id":"a","waves":[1,2,2],"cluster_states":{"c":{}}}`, `{"id":"a","waves":"3 waves: 1 wave of 1 cluster, then 2 waves of 2 clusters"}`},
		{`{"id":"a","waves":[["c1"],["c2","c3"]]}`, `{"id":"a","waves":"2 waves: 1 wave of 1 cluster, then 1 wave of 2 clusters"}`},
		{`{"id":"a","waves":{"web":[3],"db":[]}}`, `{"id":"a","waves":{"db":"none","web":"1 wave of 3 clusters"}}`},
		{`{"id":"a","waves":null}`, `{"id":"a","waves":null}`},
		{`{"id":"a"}`, `{"id":"a"}`},
	} {
		out, err := UpgradeWavesJSON([]byte(tc.in), attrs)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var got, want any
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal([]byte(tc.want), &want)
		if g, w := mustJSON(got), mustJSON(want); g != w {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, g, w)
		}
	}
	for _, bad := range []string{`not json`, `{"waves":"text"}`, `{"waves":[true]}`, `{"waves":{"m":3}}`} {
		if _, err := UpgradeWavesJSON([]byte(bad), attrs); err == nil {
			t.Errorf("%s upgraded without an error", bad)
		}
	}
}

func mustJSON(v any) string {
	var b strings.Builder
	_ = json.NewEncoder(&b).Encode(v)
	return b.String()
}

func TestWavesOutlastTimeout(t *testing.T) {
	if got := WavesOutlastTimeout(10, 5*time.Minute, time.Minute, time.Hour); got != "" {
		t.Errorf("10 waves of at most 6 min in 60 min: %q", got)
	}
	got := WavesOutlastTimeout(11, 5*time.Minute, time.Minute, time.Hour)
	for _, want := range []string{"11 waves", "1h6m0s", "1h0m0s", "timeouts"} {
		if !strings.Contains(got, want) {
			t.Errorf("11 waves of at most 6 min in 60 min: %q does not say %q", got, want)
		}
	}
	if got := WavesOutlastTimeout(0, time.Hour, 0, time.Minute); got != "" {
		t.Errorf("no waves: %q", got)
	}
}
