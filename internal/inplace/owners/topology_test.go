package owners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

var topologyOwners = Owners{ControlPlane: true, MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "extra"})}

// A managed topology is planned as the topology controller upgrades it: the control plane, then
// every MachineDeployment it made (selected or not), then the selected ones it did not make.
// Apply writes the version to the Cluster only; the topology's owners are never written. Until
// the topology controller has reconciled, the wait names what it waits for; once it has, the
// cluster verifies.
func TestTopologyUpgradeWritesTheClusterOnly(t *testing.T) {
	c, writes := topologyWorld(t, nil)
	p := &Planner{Client: c}
	change := inplace.Change{Version: "v1.34.1"}
	fp, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: topologyOwners, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	cp := fp.Cluster("c")
	if cp == nil || cp.Topology == nil || cp.Topology.Class != "cc" || cp.Topology.From != "v1.34.0" || cp.Topology.To != "v1.34.1" {
		t.Fatalf("cluster plan %+v; want a topology of ClusterClass cc from v1.34.0 to v1.34.1", cp)
	}
	var order []string
	for _, r := range cp.Owners {
		order = append(order, r.Owner.Current.GetName()+map[bool]string{true: "(topology)", false: ""}[r.Request.Selection.Topology])
	}
	if got, want := strings.Join(order, " "), "c-cp(topology) c-md-a(topology) c-md-b(topology) extra"; got != want {
		t.Errorf("owners %s; want %s", got, want)
	}
	if !strings.Contains(strings.Join(fp.Notes, "\n"), "spec.topology.version (ClusterClass \"cc\")") {
		t.Errorf("notes %q; want one saying the cluster is upgraded through spec.topology.version", fp.Notes)
	}

	// The topology controller never reconciles: the wait times out, naming what it waits for.
	_, err = p.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrNotVerified) || !errors.Is(err, engine.ErrRevisionFailed) {
		t.Fatalf("apply: %v; want not verified (the change's failure)", err)
	}
	for _, want := range []string{"Cluster fleet/c: spec.topology.version is v1.34.1",
		"KubeadmControlPlane fleet/c-cp: spec.version is v1.34.0, want v1.34.1: the topology controller has not upgraded it yet",
		"MachineDeployment fleet/c-md-a: spec.template.spec.version is v1.34.0"} {
		if !strings.Contains(errText(err), want) {
			t.Errorf("apply error %q does not say %q", errText(err), want)
		}
	}
	// Only the Cluster was written; "extra" (not the topology's) got the version directly.
	if got := strings.Join(*writes, ", "); got != "patch Cluster c" {
		t.Errorf("writes %s; want only the Cluster's patch (the extra MachineDeployment's is not reached after a failed topology)", got)
	}
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: "c"}, cl); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "version"); v != "v1.34.1" || cl.GetAnnotations()[AnnotationRevision] != fp.Revision {
		t.Errorf("Cluster spec.topology.version %q, revision %q; want v1.34.1, %s", v, cl.GetAnnotations()[AnnotationRevision], fp.Revision)
	}

	// The topology controller does its part: the control plane, then the MachineDeployments.
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, u.GetGeneration(), "status", "observedGeneration")
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": topologyReconciledCondition, "status": "True", "reason": "ReconcileSucceeded", "observedGeneration": u.GetGeneration()}}, "status", "conditions")
	})
	edit(t, c, kcpGVK, "c-cp", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "v1.34.1", "spec", "version")
	})
	for _, md := range []string{"c-md-a", "c-md-b"} {
		edit(t, c, machineDeploymentGVK, md, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "v1.34.1", "spec", "template", "spec", "version")
		})
	}
	if _, err := p.VerifyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("verify after the topology controller reconciled: %v", err)
	}
	// The refresh reads the revision from the Cluster for the topology's owners.
	obs, err := p.Observe(t.Context(), cp.Owners[1].Request.Selection, change)
	if err != nil || obs.OwnerRevision != fp.Revision {
		t.Errorf("observe c-md-a: revision %q, err %v; want %s (the Cluster's)", obs.OwnerRevision, err, fp.Revision)
	}
}

// A topology whose Cluster cannot be written (the API server refuses) stops with that error,
// unclassified (it says nothing about the change); one changed since the plan is a stale plan,
// refused with nothing written.
func TestTopologyWriteFaults(t *testing.T) {
	plan := func(c client.Client) (*Planner, *ClusterPlan) {
		p := &Planner{Client: c}
		fp, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Owners{ControlPlane: true}, Change: inplace.Change{Version: "v1.35.0"}, Fallback: inplace.FallbackNone, Endpoints: nil})
		if err != nil {
			t.Fatal(err)
		}
		return p, fp.Cluster("c")
	}
	c, _ := topologyWorld(t, apierrors.NewServiceUnavailable("management API down"))
	p, cp := plan(c)
	_, err := p.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: time.Second})
	if err == nil || errors.Is(err, ErrNotVerified) || errors.Is(err, engine.ErrChangeRefused) || !strings.Contains(errText(err), "Cannot Write Cluster") {
		t.Errorf("apply against a failing API server: %v; want Cannot Write Cluster, neither refused nor not verified", err)
	}

	c, writes := topologyWorld(t, nil)
	p, cp = plan(c)
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "v1.34.1", "spec", "topology", "version")
	})
	*writes = (*writes)[:0]
	_, err = p.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: time.Second})
	if !errors.Is(err, engine.ErrChangeRefused) || !strings.Contains(errText(err), "Cluster Changed Since The Plan") {
		t.Errorf("apply of a stale plan: %v; want Cluster Changed Since The Plan, refused", err)
	}
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: "c"}, cl); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "version"); v != "v1.34.1" {
		t.Errorf("spec.topology.version %s after a refused apply; want v1.34.1 (the other writer's)", v)
	}
}

// What cannot go through a managed topology is refused at plan, with nothing written: template
// patches (they go through the ClusterClass), no version, a version the ClusterClass does not
// list, a downgrade, and the topology's MachineDeployments picked without the control plane.
func TestTopologyPlanRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners Owners
		change inplace.Change
		want   string
	}{
		{"template patch", Owners{ControlPlane: true}, inplace.Change{Version: "v1.34.1", InfrastructureMachineSpec: []byte(`{"a":1}`)}, "Template Change Through The ClusterClass"},
		{"no version", Owners{ControlPlane: true}, inplace.Change{}, "No Version For A Managed Topology"},
		{"version not in the class", Owners{ControlPlane: true}, inplace.Change{Version: "v1.36.0"}, "Version Not In The ClusterClass"},
		{"downgrade", Owners{ControlPlane: true}, inplace.Change{Version: "v1.33.9"}, "Topology Downgrade"},
		{"topology MachineDeployments alone", Owners{MachineDeployments: labels.Everything()}, inplace.Change{Version: "v1.34.1"}, "Owner Managed By A ClusterClass"},
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
	_, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Owners{ControlPlane: true}, Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone, Endpoints: nil})
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

// topologyVariables is the Cluster's spec.topology.variables as "name=compact JSON", in order.
func topologyVariables(t *testing.T, c client.Client) string {
	t.Helper()
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: "c"}, cl); err != nil {
		t.Fatal(err)
	}
	list, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "variables")
	var out []string
	for _, v := range list {
		m := v.(map[string]any)
		out = append(out, fmt.Sprintf("%s=%s", m["name"], compactJSON(m["value"])))
	}
	return strings.Join(out, " ")
}

// Topology variables alone (no version): the plan checks them with a dry run of the write and
// shows each change from → to with its cluster, saying the preview cannot run the ClusterClass's
// patches; the cluster changes though no machine does. Apply writes them by name into the
// Cluster's list (the others as they were, a new one appended), the version untouched, and waits
// for TopologyReconciled at the new generation.
func TestTopologyVariablesMerge(t *testing.T) {
	c, writes := topologyWorld(t, nil)
	p := &Planner{Client: c}
	change := inplace.Change{TopologyVariables: map[string]json.RawMessage{"note": json.RawMessage(`"b"`), "count": json.RawMessage(`3`)}}
	fp, err := p.PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Owners{ControlPlane: true}, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	cp := fp.Cluster("c")
	want := []VariableChange{{Name: "count", From: "", To: "3"}, {Name: "note", From: `"a"`, To: `"b"`}}
	if cp.Topology == nil || !reflect.DeepEqual(cp.Topology.Variables, want) || cp.Topology.To != "v1.34.0" {
		t.Fatalf("topology %+v; want variables %v and the version left at v1.34.0", cp.Topology, want)
	}
	if !cp.Changes() || cp.Current(fp.Revision) {
		t.Errorf("a cluster whose variables change: Changes %v, Current %v; want true, false", cp.Changes(), cp.Current(fp.Revision))
	}
	notes := strings.Join(fp.Notes, "\n")
	for _, w := range []string{`count: unset → 3 in 1 cluster: c`, `note: "a" → "b" in 1 cluster: c`, "the preview cannot run them"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes %q do not say %q", notes, w)
		}
	}
	if strings.Contains(notes, "assumes the ClusterClass's patches change nothing") {
		t.Errorf("notes %q promise what the patches do", notes)
	}
	if got := strings.Join(*writes, ", "); got != "dry-run patch Cluster c" {
		t.Errorf("writes at plan: %s; want only the dry run", got)
	}
	if got := topologyVariables(t, c); got != `other={"keep":true} note="a"` {
		t.Errorf("variables after the plan: %s; want them as they were", got)
	}

	if _, err := p.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond}); err != nil {
		t.Logf("apply: %v", err) // the fake API server does not count generations: the wait may end at once
	}
	if got := topologyVariables(t, c); got != `other={"keep":true} note="b" count=3` {
		t.Errorf("variables after apply: %s; want other untouched, note set, count appended", got)
	}
	if got := strings.Join(*writes, ", "); got != "dry-run patch Cluster c, patch Cluster c" {
		t.Errorf("writes: %s; want the plan's dry run and apply's patch of the Cluster only", got)
	}
	// The API server counts the write as a new generation, which the topology controller has not
	// reconciled yet: not verified.
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) { u.SetGeneration(2) })
	_, err = p.VerifyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrNotVerified) || !strings.Contains(errText(err), "observedGeneration 1 behind generation 2") {
		t.Fatalf("verify before the topology controller reconciled: %v; want not verified, waiting for the Cluster's generation", err)
	}
	// Someone sets the variable back: the wait says so.
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "note", "value": "a"}}, "spec", "topology", "variables")
	})
	_, err = p.VerifyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
	if !strings.Contains(errText(err), `topology variable note is "a", want "b"`) {
		t.Errorf("verify after the variable was set back: %v; want it named", err)
	}

	// Planned again once applied: nothing changes.
	c2, _ := topologyWorld(t, nil)
	edit(t, c2, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "note", "value": "b"}, map[string]any{"name": "count", "value": int64(3)}}, "spec", "topology", "variables")
	})
	fp, err = (&Planner{Client: c2}).PlanFleet(t.Context(), FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: Owners{ControlPlane: true}, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if cp := fp.Cluster("c"); len(cp.Topology.Variables) != 0 || cp.Changes() {
		t.Errorf("variables already set: changes %v; want none", cp.Topology.Variables)
	}
}

// What topology variables cannot do is refused at plan with nothing written, not even the dry
// run: a variable the ClusterClass does not define (named, with the Cluster and the variables
// the class defines), a value that is not JSON, variables for an owner written directly.
func TestTopologyVariablesRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners Owners
		vars   map[string]string
		want   []string
	}{
		{"not in the class", Owners{ControlPlane: true}, map[string]string{"note": `"b"`, "regoin": `"eu"`},
			[]string{"Topology Variable Not In The ClusterClass", `Cluster fleet/c is built from ClusterClass fleet/cc, which defines no variable "regoin"`, "it defines: count, note, other"}},
		{"not JSON", Owners{ControlPlane: true}, map[string]string{"note": `eu-west`}, []string{"Invalid Topology Variable", `topology variable "note" is not JSON`}},
		{"two JSON values", Owners{ControlPlane: true}, map[string]string{"note": `"a" "b"`}, []string{"Invalid Topology Variable"}},
		{"owner written directly", Owners{MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "extra"})}, map[string]string{"note": `"b"`},
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
	res := &Result{Machines: []Machine{machine("moved", "ms-1"), machine("stayed", "ms-1"), machine("gone", "ms-1")}}
	l := &look{machines: map[string]string{"moved": "uid-moved", "stayed": "uid-stayed", "new": "uid-new"}, moved: map[string]bool{"moved": true}}
	got := l.status(res)
	want := map[string]string{"moved": StatusUpdated, "stayed": StatusUnchanged, "gone": StatusReplaced, "new": StatusCreated}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status %v, want %v", got, want)
	}
}
