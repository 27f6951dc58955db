package owners

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

func rawVars(vars map[string]string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for n, v := range vars {
		out[n] = json.RawMessage(v)
	}
	return out
}

// A refresh compares each configured variable with the Cluster's value as JSON values: the same
// value written with other spacing, key order or number spelling holds; one set back, or never
// set, is named with the Cluster's value and the configured one. A Cluster without a managed
// topology has nothing to compare; a Cluster that cannot be read fails the refresh.
func TestVariableDrift(t *testing.T) {
	c, writes := topologyWorld(t, nil)
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"name": "other", "value": map[string]any{"keep": true, "n": int64(2)}},
			map[string]any{"name": "note", "value": "a"},
			map[string]any{"name": "count", "value": int64(3)},
		}, "spec", "topology", "variables")
	})
	r := &Reader{Client: c}
	got, err := r.VariableDrift(t.Context(), "fleet", "c", rawVars(map[string]string{
		"other": `{ "n": 2.0, "keep" : true }`, "count": `3e0`, "note": `"b"`, "region": `"eu"`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []VariableChange{{Name: "note", From: `"a"`, To: `"b"`}, {Name: "region", From: "", To: `"eu"`}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("drift %+v; want %+v (other and count hold their values, written otherwise)", got, want)
	}
	if len(*writes) > 0 {
		t.Errorf("writes %v at refresh", *writes)
	}

	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "topology") })
	if got, err := r.VariableDrift(t.Context(), "fleet", "c", rawVars(map[string]string{"note": `"b"`})); err != nil || got != nil {
		t.Errorf("a Cluster without spec.topology: %v, %v; want no drift", got, err)
	}

	failing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			return errors.New("etcdserver: request timed out")
		},
	})
	_, err = (&Reader{Client: failing}).VariableDrift(t.Context(), "fleet", "c", rawVars(map[string]string{"note": `"b"`}))
	if !strings.Contains(errText(err), "Cannot Read Cluster") || !strings.Contains(errText(err), "request timed out") {
		t.Errorf("refresh with the API failing: %v; want Cannot Read Cluster with the cause", err)
	}
}

// The plan judges a variable's change the same way: a value the Cluster holds already, written
// otherwise, is no change.
func TestTopologyVariablesSameValueWrittenOtherwise(t *testing.T) {
	c, _ := topologyWorld(t, nil)
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"name": "other", "value": map[string]any{"keep": true}},
			map[string]any{"name": "count", "value": int64(3)},
		}, "spec", "topology", "variables")
	})
	fp, err := (&Planner{Client: c}).PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Pick{ControlPlane: true},
		Change: inplace.Change{TopologyVariables: rawVars(map[string]string{"count": `3.0`, "other": ` {"keep":true} `})}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if cp := fp.Cluster("c"); len(cp.Topology.Variables) != 0 || cp.Changes() {
		t.Errorf("variables held already: changes %+v; want none", cp.Topology.Variables)
	}
}

// A fleet picked by selector may mix ClusterClass-built Clusters with others: with topology
// variables, a Cluster without spec.topology is skipped with the reason and the others are
// planned. Named, it is refused, naming it. Without the control plane selected the variables
// reach no topology anywhere: refused either way.
func TestPlanFleetMixedTopology(t *testing.T) {
	c, writes := topologyWorld(t, nil)
	plain := obj(clusterGVK, "plain", map[string]any{"spec": map[string]any{
		"controlPlaneRef": map[string]any{"apiGroup": kcpGVK.Group, "kind": KindKubeadmControlPlane, "name": "plain-cp"},
	}})
	if err := c.Create(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	p := &Planner{Client: c}
	req := FleetRequest{Namespace: "fleet", Clusters: []string{"c", "plain"}, Owners: Pick{ControlPlane: true},
		Change: inplace.Change{TopologyVariables: rawVars(map[string]string{"note": `"b"`})}, Fallback: inplace.FallbackNone, Endpoints: nil, SkipUnmanaged: true}
	fp, err := p.PlanFleet(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if cp := fp.Cluster("plain"); cp == nil || cp.SkipReason != SkipNoTopology || len(cp.Owners) != 0 {
		t.Errorf("cluster plain: %+v; want skipped: %s", cp, SkipNoTopology)
	}
	if cp := fp.Cluster("c"); cp == nil || cp.SkipReason != "" || cp.Topology == nil || len(cp.Topology.Variables) != 1 {
		t.Errorf("cluster c: %+v; want planned with its variable", cp)
	}
	if got := strings.Join(*writes, ", "); got != "dry-run patch Cluster c" {
		t.Errorf("writes at plan: %s; want the dry run of c only", got)
	}

	named := req
	named.SkipUnmanaged = false
	if _, err := p.PlanFleet(t.Context(), named); !strings.Contains(errText(err), "Topology Variables Without A Managed Topology") || !strings.Contains(errText(err), "Cluster fleet/plain") {
		t.Errorf("plain named: %v; want refused, naming it", err)
	}
	noCP := req
	noCP.Owners = topologyOwners
	noCP.Owners.ControlPlane = false
	if _, err := p.PlanFleet(t.Context(), noCP); !strings.Contains(errText(err), "Topology Variables Without A Managed Topology") {
		t.Errorf("control plane not selected: %v; want refused", err)
	}
}

// A MachineDeployment (or the control plane) whose variables.overrides holds its own value of a
// variable the apply changes does not get the change: the plan's variables note names it, per
// cluster, with the variable. An override of a variable not changed is not named.
func TestVariablesNoteNamesOverrides(t *testing.T) {
	c, _ := topologyWorld(t, nil)
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, map[string]any{"machineDeployments": []any{
			map[string]any{"class": "default-worker", "name": "md-b", "variables": map[string]any{"overrides": []any{map[string]any{"name": "note", "value": "z"}}}},
			map[string]any{"class": "default-worker", "name": "md-a", "variables": map[string]any{"overrides": []any{
				map[string]any{"name": "other", "value": "x"}, map[string]any{"name": "note", "value": "y"}}}},
			map[string]any{"class": "default-worker", "name": "md-c"},
			map[string]any{"class": "default-worker", "name": "md-d", "variables": map[string]any{"overrides": []any{map[string]any{"name": "other", "value": "x"}}}},
		}}, "spec", "topology", "workers")
		_ = unstructured.SetNestedField(u.Object, map[string]any{"variables": map[string]any{"overrides": []any{map[string]any{"name": "count", "value": int64(1)}}}},
			"spec", "topology", "controlPlane")
	})
	fp, err := (&Planner{Client: c}).PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Pick{ControlPlane: true},
		Change: inplace.Change{TopologyVariables: rawVars(map[string]string{"note": `"b"`, "count": `4`, "other": `{"keep":true}`})}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(fp.Notes, "\n")
	want := "\n  cluster c: count by the control plane; note by MachineDeployment md-a, MachineDeployment md-b\n"
	if !strings.Contains(notes, "Overridden, so the change does not reach them") || !strings.Contains(notes, want) {
		t.Errorf("notes %q; want the overrides named: %q", notes, want)
	}
	if strings.Contains(notes, "md-d") || strings.Contains(notes, "md-c") {
		t.Errorf("notes %q name a MachineDeployment that does not override a changed variable", notes)
	}
	// No override of a changed variable: no such line.
	c2, _ := topologyWorld(t, nil)
	fp, err = (&Planner{Client: c2}).PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Pick{ControlPlane: true},
		Change: inplace.Change{TopologyVariables: rawVars(map[string]string{"note": `"b"`})}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(fp.Notes, "\n"), "Overridden") {
		t.Errorf("notes %q speak of overrides where there are none", fp.Notes)
	}
}

// The overrides note names at most ten clusters and counts the others.
func TestOverridesNoteIsBounded(t *testing.T) {
	var clusters []*ClusterPlan
	for i := range 13 {
		clusters = append(clusters, &ClusterPlan{Cluster: string(rune('a'+i)) + "-cluster", Topology: &Topology{
			Variables: []VariableChange{{Name: "note", To: `"b"`, OverriddenIn: []string{"MachineDeployment md-0"}}}}})
	}
	got := overridesNote(clusters)
	if strings.Count(got, "\n  cluster ") != 10 || !strings.Contains(got, "\n  and 3 more clusters") || strings.Contains(got, "k-cluster") {
		t.Errorf("note %q; want ten clusters named (a to j) and 3 counted", got)
	}
}
