package fleetresource

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
)

// WavesText is how a plan shows waves: one line whatever their number, so that a plan over a
// thousand clusters one at a time (update_limit "1", the default) is still read at a glance.
// Runs of waves of the same size are counted, canary waves first:
//
//	"3 waves of 2 clusters"
//	"1000 waves: 1 canary wave of 1 cluster, then 999 waves of 1 cluster"
//	"4 waves: 3 waves of 25 clusters, then 1 wave of 24 clusters"
//
// and "none" when there is nothing to do. The clusters of each wave are in the Planned Waves
// warning (the first ones) and the status data sources.
func WavesText(sizes []int, canaryWaves int) string {
	if len(sizes) == 0 {
		return "none"
	}
	canaryWaves = min(max(canaryWaves, 0), len(sizes))
	var runs []string
	for i := 0; i < len(sizes); {
		j := i + 1
		for j < len(sizes) && sizes[j] == sizes[i] && (j < canaryWaves) == (i < canaryWaves) {
			j++
		}
		kind := "wave"
		if i < canaryWaves {
			kind = "canary wave"
		}
		runs = append(runs, fmt.Sprintf("%s of %s", plural(j-i, kind), plural(sizes[i], "cluster")))
		i = j
	}
	if len(runs) == 1 {
		return runs[0]
	}
	return plural(len(sizes), "wave") + ": " + strings.Join(runs, ", then ")
}

// WaveSizes are the sizes of waves given as their clusters.
func WaveSizes(waves [][]string) []int {
	sizes := make([]int, len(waves))
	for i, w := range waves {
		sizes[i] = len(w)
	}
	return sizes
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// UpgradeWavesJSON rewrites a stored state from before `waves` was text: a list of wave sizes
// (or, older still, of the clusters of each wave), or a map of such lists per module, becomes
// WavesText (canary waves are not told apart: the next plan that changes anything writes them
// anew). Attributes the current schema does not have (attrs) are dropped, as a plain refresh
// would drop them.
func UpgradeWavesJSON(in []byte, attrs map[string]bool) ([]byte, error) {
	st, err := currentAttributes(in, attrs)
	if err != nil {
		return nil, err
	}
	if raw, ok := st["waves"]; ok {
		text, err := wavesFromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("waves: %w", err)
		}
		if st["waves"], err = json.Marshal(text); err != nil {
			return nil, err
		}
	}
	return json.Marshal(st)
}

// wavesFromJSON converts a stored `waves` value: null stays null; a list becomes its text; a map
// of lists, a map of texts.
func wavesFromJSON(raw json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return listText(v)
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			list, ok := e.([]any)
			if !ok {
				return nil, fmt.Errorf("module %q: %T, want a list", k, e)
			}
			text, err := listText(list)
			if err != nil {
				return nil, fmt.Errorf("module %q: %w", k, err)
			}
			out[k] = text
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T, want a list or a map", v)
}

func listText(list []any) (string, error) {
	sizes := make([]int, len(list))
	for i, e := range list {
		switch e := e.(type) {
		case float64:
			sizes[i] = int(e)
		case []any:
			sizes[i] = len(e)
		default:
			return "", fmt.Errorf("wave %d: %T, want a count or a list of clusters", i+1, e)
		}
	}
	return WavesText(sizes, 0), nil
}

// WavesOutlastTimeout says, for a plan of waves waves, whether they can take longer than
// timeout (the resource's `timeouts` for this apply) when every wave takes as long as it may:
// verification up to verify, then bake. It returns the warning's detail, or "" when they fit.
// An apply stopped by its timeout settles what is in flight and leaves the rest for the next
// apply, so this is a warning, not a refusal.
func WavesOutlastTimeout(waves int, verify, bake, timeout time.Duration) string {
	if waves == 0 || timeout <= 0 {
		return ""
	}
	worst := time.Duration(waves) * (verify + bake)
	if worst <= timeout {
		return ""
	}
	return fmt.Sprintf("The %s planned can take up to %s (each verified for up to %s, then baked %s), longer than this apply's timeout "+
		"of %s. If it runs out, the apply stops as on Ctrl-C: the clusters in flight are settled, and the rest wait for the next apply. "+
		"Raise `timeouts` (create/update), or `update_limit` for fewer waves.",
		plural(waves, "wave"), worst, verify, bake, timeout)
}

// WarnWavesOutlast adds WavesOutlastTimeout's warning, if any, for waves planned under policy
// within the `timeouts` tv (its create timeout when create, else its update timeout).
func WarnWavesOutlast(ctx context.Context, diags *diag.Diagnostics, tv timeouts.Value, create bool, waves int, policy engine.Policy) {
	timeout, d := tv.Update(ctx, DefaultApplyTimeout)
	if create {
		timeout, d = tv.Create(ctx, DefaultApplyTimeout)
	}
	if d.HasError() {
		return // the timeouts attribute reports its own errors
	}
	if detail := WavesOutlastTimeout(waves, policy.VerifyTimeout, policy.BakeTime, timeout); detail != "" {
		diags.AddAttributeWarning(path.Root("timeouts"), "Waves May Outlast The Timeout", detail)
	}
}
