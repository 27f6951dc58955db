package fleetupdate

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// A fleet update over a thousand clusters, one at a time (the default update_limit), every
// worker in place but for three clusters whose machine Cluster API would replace and two
// skipped clusters: what the plan shows grows with what needs a look, not with the fleet —
// waves in one line, a summary of counts, and attention for those five clusters only.
func TestSummarySizedByTheChange(t *testing.T) {
	const n = 1000
	version := []inplace.Field{{Object: inplace.KindMachine, Path: "/spec/version"}}
	replaced := map[string]bool{"c-0100": true, "c-0500": true, "c-0900": true}
	// Planned in place, but its MachineDeployment surges: Cluster API may replace some.
	const surging = "c-0700"
	const surgeWhy = "MachineDeployment fleet/c-0700-md-0 rolls out with maxSurge 1"
	skipped := map[string]string{"c-0003": "control plane not initialized", "c-0004": "paused"}
	live := &owners.FleetPlan{Revision: "ip-0123456789"}
	limit, err := engine.ParseLimit("1")
	if err != nil {
		t.Fatal(err)
	}
	policy := engine.Policy{UpdateLimit: limit, Canary: []string{"c-0001"}, Irreversible: true}
	var targets []engine.Target
	for i := range n {
		name := fmt.Sprintf("c-%04d", i+1)
		targets = append(targets, engine.Target{Name: name, SkipReason: skipped[name]})
		if _, ok := skipped[name]; ok {
			continue
		}
		var machines []inplace.MachinePlan
		for j := range 3 {
			mp := inplace.MachinePlan{Machine: fmt.Sprintf("%s-md-0-%d", name, j), Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}, Changed: version}
			if j == 0 && replaced[name] {
				mp.Strategy, mp.Extensions, mp.Uncovered = inplace.StrategyRolling, nil, version
			}
			if name == surging {
				mp.MayBeReplaced = surgeWhy
			}
			machines = append(machines, mp)
		}
		live.Clusters = append(live.Clusters, &owners.ClusterPlan{Cluster: name, Owners: []*owners.PlanResult{{
			Owner: &owners.Owner{Current: &unstructured.Unstructured{Object: map[string]any{}}},
			Plan:  inplace.Plan{Machines: machines},
		}}})
	}
	p := engine.PlanRollout(targets, live.Revision, policy)
	if len(p.Waves) != 998 || p.CanaryWaves != 1 {
		t.Errorf("%d waves (%d canary), want 998 (1 canary)", len(p.Waves), p.CanaryWaves)
	}
	sum, att := Summarize(live, p)
	if len(att) != len(replaced)+len(skipped)+1 {
		t.Errorf("attention names %d clusters, want the %d that need a look: %v", len(att), len(replaced)+len(skipped)+1, att)
	}
	if v, ok := att[surging]; !ok || !strings.Contains(v, "machines c-0700-md-0-0, c-0700-md-0-1, c-0700-md-0-2 may be replaced by Cluster API ("+surgeWhy+")") {
		t.Errorf("attention[%s] = %v, want its machines that may be replaced, and why", surging, v)
	}
	for name := range replaced {
		if v, ok := att[name]; !ok || !strings.Contains(v, "replaced by Cluster API (machine spec.version)") {
			t.Errorf("attention[%s] = %v, want the replaced machine and the field", name, v)
		}
	}
	for name, why := range skipped {
		if v, ok := att[name]; !ok || !strings.Contains(v, why) {
			t.Errorf("attention[%s] = %v, want skipped: %s", name, v, why)
		}
	}
	want := map[string]int64{"clusters": n, "skipped": 2, "current": 0, "changing": n - 2, "in_place": 3*(n-2) - 3, "rolling": 3, "unchanged": 0}
	for k, w := range want {
		if sum[k] != w {
			t.Errorf("summary[%s] = %d, want %d (summary %v)", k, sum[k], w, sum)
		}
	}
}
