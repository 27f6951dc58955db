package owners

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

var topologyOwners = Pick{ControlPlane: true, MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "extra"})}

// What cannot go through a managed topology is refused at plan, with nothing written: template
// patches (they go through the ClusterClass), no version, a version the ClusterClass does not
// list, a downgrade, and the topology's MachineDeployments picked without the control plane.
func TestTopologyPlanRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners Pick
		change inplace.Change
		want   string
	}{
		{"template patch", Pick{ControlPlane: true}, inplace.Change{Version: "v1.34.1", InfrastructureMachineSpec: []byte(`{"a":1}`)}, "Template Change Through The ClusterClass"},
		{"no version", Pick{ControlPlane: true}, inplace.Change{}, "No Version For A Managed Topology"},
		{"version not in the class", Pick{ControlPlane: true}, inplace.Change{Version: "v1.36.0"}, "Version Not In The ClusterClass"},
		{"downgrade", Pick{ControlPlane: true}, inplace.Change{Version: "v1.33.9"}, "Topology Downgrade"},
		{"topology MachineDeployments alone", Pick{MachineDeployments: labels.Everything()}, inplace.Change{Version: "v1.34.1"}, "Owner Managed By A ClusterClass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, writes := topologyWorld(t, nil)
			p := &Planner{Client: c}
			_, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: tc.owners, Change: tc.change, Fallback: inplace.FallbackNone, Endpoints: nil})
			if err == nil || !strings.Contains(errText(err), tc.want) {
				t.Errorf("plan: %v; want %s", err, tc.want)
			}
			if len(*writes) > 0 {
				t.Errorf("writes %v at plan", *writes)
			}
		})
	}
}

// An API server error reading the topology's MachineDeployments fails the plan, naming the cluster.
func TestTopologyPlanListError(t *testing.T) {
	c, _ := topologyWorld(t, nil)
	failing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if l.GetObjectKind().GroupVersionKind().Kind == "MachineDeploymentList" {
				return apierrors.NewTooManyRequests("slow down", 1)
			}
			return c.List(ctx, l, opts...)
		},
	})
	p := &Planner{Client: failing}
	_, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Pick{ControlPlane: true}, Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err == nil || !strings.Contains(errText(err), "Cannot List MachineDeployments") {
		t.Errorf("plan: %v; want Cannot List MachineDeployments", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The Cluster's part of the wait: the version someone else changed, a generation not observed,
// TopologyReconciled absent (the topology controller not running: the ClusterTopology gate),
// not True (its reason and message) or about an older generation.
func TestTopologyProblems(t *testing.T) {
	top := &Topology{Cluster: obj(clusterGVK, "c", map[string]any{}), To: "v1.35.0"}
	cluster := func(version string, observed int64, cond map[string]any) *unstructured.Unstructured {
		u := obj(clusterGVK, "c", map[string]any{"spec": map[string]any{"topology": map[string]any{"version": version}}, "status": map[string]any{"observedGeneration": observed}})
		u.SetGeneration(3)
		if cond != nil {
			_ = unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions")
		}
		return u
	}
	reconciled := map[string]any{"type": topologyReconciledCondition, "status": "True", "observedGeneration": int64(3)}
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want string
	}{
		{"done", cluster("v1.35.0", 3, reconciled), ""},
		{"version changed", cluster("v1.35.1", 3, reconciled), "spec.topology.version is v1.35.1, want v1.35.0"},
		{"generation not observed", cluster("v1.35.0", 2, reconciled), "observedGeneration 2 behind generation 3"},
		{"no condition", cluster("v1.35.0", 3, nil), "no TopologyReconciled condition: the topology controller has not reconciled it (is Cluster API's ClusterTopology feature gate on?)"},
		{"upgrading", cluster("v1.35.0", 3, map[string]any{"type": topologyReconciledCondition, "status": "False", "reason": "ClusterUpgrading", "message": "Control plane is upgrading to version v1.35.0"}),
			"TopologyReconciled False (ClusterUpgrading): Control plane is upgrading to version v1.35.0"},
		{"old generation", cluster("v1.35.0", 3, map[string]any{"type": topologyReconciledCondition, "status": "True", "observedGeneration": int64(2)}), "TopologyReconciled is about generation 2, not 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(topologyProblems(tc.u, top), "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("problems %q; want %q", got, tc.want)
			}
		})
	}
}

// What topology variables cannot do is refused at plan with nothing written, not even the dry
// run: a variable the ClusterClass does not define (named, with the Cluster and the variables
// the class defines), a value that is not JSON, variables for an owner written directly.
func TestTopologyVariablesRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners Pick
		vars   map[string]string
		want   []string
	}{
		{"not in the class", Pick{ControlPlane: true}, map[string]string{"note": `"b"`, "regoin": `"eu"`},
			[]string{"Topology Variable Not In The ClusterClass", `Cluster fleet/c is built from ClusterClass fleet/cc, which defines no variable "regoin"`, "it defines: count, note, other"}},
		{"not JSON", Pick{ControlPlane: true}, map[string]string{"note": `eu-west`}, []string{"Invalid Topology Variable", `topology variable "note" is not JSON`}},
		{"two JSON values", Pick{ControlPlane: true}, map[string]string{"note": `"a" "b"`}, []string{"Invalid Topology Variable"}},
		{"owner written directly", Pick{MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "extra"})}, map[string]string{"note": `"b"`},
			[]string{"Topology Variables Without A Managed Topology", "Cluster fleet/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, writes := topologyWorld(t, nil)
			change := inplace.Change{Version: "v1.34.1", TopologyVariables: map[string]json.RawMessage{}}
			for n, v := range tc.vars {
				change.TopologyVariables[n] = json.RawMessage(v)
			}
			_, err := (&Planner{Client: c}).PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: tc.owners, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
			for _, w := range tc.want {
				if !strings.Contains(errText(err), w) {
					t.Errorf("plan: %v; want it to say %q", err, w)
				}
			}
			if len(*writes) > 0 {
				t.Errorf("writes %v at plan", *writes)
			}
		})
	}
}

// The fleet's variable note is one line per variable and change, the clusters counted and the
// first five named, however many clusters there are.
func TestVariablesNoteGroupsClusters(t *testing.T) {
	var clusters []*ClusterPlan
	for i := range 12 {
		from := `"a"`
		if i == 11 {
			from = ""
		}
		clusters = append(clusters, &ClusterPlan{Cluster: fmt.Sprintf("c%02d", i), Topology: &Topology{Variables: []VariableChange{{Name: "note", From: from, To: `"b"`}}}})
	}
	clusters = append(clusters, &ClusterPlan{Cluster: "direct"})
	got := variablesNote(clusters)
	for _, w := range []string{"\n  note: \"a\" → \"b\" in 11 clusters: c00, c01, c02, c03, c04 and 6 more\n  note: unset → \"b\" in 1 cluster: c11\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("note %q does not say %q", got, w)
		}
	}
	if variablesNote(clusters[12:]) != "" {
		t.Error("a note without any variable change")
	}
}

// Revisions: a change without variables hashes as before variables existed; variables change
// it, in any order of the same values.
func TestRevisionWithVariables(t *testing.T) {
	base := inplace.Change{Version: "v1.34.1"}
	if Revision(base) != Revision(inplace.Change{Version: "v1.34.1", TopologyVariables: map[string]json.RawMessage{}}) {
		t.Error("an empty variable map changes the revision")
	}
	a := inplace.Change{Version: "v1.34.1", TopologyVariables: map[string]json.RawMessage{"x": json.RawMessage(`{"b":1,"a":2}`), "y": json.RawMessage(`"s"`)}}
	b := inplace.Change{Version: "v1.34.1", TopologyVariables: map[string]json.RawMessage{"y": json.RawMessage(` "s" `), "x": json.RawMessage(`{"a":2,"b":1}`)}}
	if Revision(a) == Revision(base) || Revision(a) != Revision(b) {
		t.Errorf("revisions %s, %s, %s: want the variables to change it, written either way alike", Revision(base), Revision(a), Revision(b))
	}
}

// After apply, a machine planned unchanged that Cluster API kept (same UID) but moved to another
// MachineSet was updated in place (what a topology variable the preview cannot follow does): its
// status is updated; one that stayed is unchanged, one gone replaced, a new one created.
func TestStatusOfMachinesMovedInPlace(t *testing.T) {
	machine := func(name, set string) Machine {
		u := obj(machineGVK, name, map[string]any{})
		u.SetUID(types.UID("uid-" + name))
		u.SetLabels(map[string]string{machineSetLabel: set})
		return Machine{Current: inplace.Objects{Machine: u}, Plan: inplace.MachinePlan{Machine: name, Strategy: inplace.StrategyUnchanged}}
	}
	res := &PlanResult{Machines: []Machine{machine("moved", "ms-1"), machine("stayed", "ms-1"), machine("gone", "ms-1")}}
	l := &Look{machines: map[string]string{"moved": "uid-moved", "stayed": "uid-stayed", "new": "uid-new"}, moved: map[string]bool{"moved": true}}
	got := l.Status(res)
	want := map[string]string{"moved": StatusUpdated, "stayed": StatusUnchanged, "gone": StatusReplaced, "new": StatusCreated}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status %v, want %v", got, want)
	}
}
