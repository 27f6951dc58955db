package ownerupdate

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

// A managed topology is planned as the topology controller upgrades it: the control plane, then
// every MachineDeployment it made (selected or not), then the selected ones it did not make.
// Apply writes the version to the Cluster only; the topology's owners are never written. Until
// the topology controller has reconciled, the wait names what it waits for; once it has, the
// cluster verifies.
func TestTopologyUpgradeWritesTheClusterOnly(t *testing.T) {
	c, writes := topologyWorld(t, nil)
	p, up := &owners.Planner{Client: c}, updater(c)
	change := inplace.Change{Version: "v1.34.1"}
	fp, err := p.PlanFleet(t.Context(), owners.FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: topologyOwners, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
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
	_, err = up.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
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
	if v, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "version"); v != "v1.34.1" || cl.GetAnnotations()[owners.AnnotationRevision] != fp.Revision {
		t.Errorf("Cluster spec.topology.version %q, revision %q; want v1.34.1, %s", v, cl.GetAnnotations()[owners.AnnotationRevision], fp.Revision)
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
	if _, err := up.VerifyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("verify after the topology controller reconciled: %v", err)
	}
	// The refresh reads the revision from the Cluster for the topology's owners.
	obs, err := (&owners.Reader{Client: c}).Observe(t.Context(), cp.Owners[1].Request.Selection, change)
	if err != nil || obs.OwnerRevision != fp.Revision {
		t.Errorf("observe c-md-a: revision %q, err %v; want %s (the Cluster's)", obs.OwnerRevision, err, fp.Revision)
	}
}

// A topology whose Cluster cannot be written (the API server refuses) stops with that error,
// unclassified (it says nothing about the change); one changed since the plan is a stale plan,
// refused with nothing written.
func TestTopologyWriteFaults(t *testing.T) {
	plan := func(c client.Client) (*Updater, *owners.ClusterPlan) {
		p := &owners.Planner{Client: c}
		fp, err := p.PlanFleet(t.Context(), owners.FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: owners.Pick{ControlPlane: true}, Change: inplace.Change{Version: "v1.35.0"}, Fallback: inplace.FallbackNone, Endpoints: nil})
		if err != nil {
			t.Fatal(err)
		}
		return updater(c), fp.Cluster("c")
	}
	c, _ := topologyWorld(t, apierrors.NewServiceUnavailable("management API down"))
	up, cp := plan(c)
	_, err := up.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: time.Second})
	if err == nil || errors.Is(err, ErrNotVerified) || errors.Is(err, engine.ErrChangeRefused) || !strings.Contains(errText(err), "Cannot Write Cluster") {
		t.Errorf("apply against a failing API server: %v; want Cannot Write Cluster, neither refused nor not verified", err)
	}

	c, writes := topologyWorld(t, nil)
	up, cp = plan(c)
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "v1.34.1", "spec", "topology", "version")
	})
	*writes = (*writes)[:0]
	_, err = up.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: time.Second})
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

// Topology variables alone (no version): the plan checks them with a dry run of the write and
// shows each change from → to with its cluster, saying the preview cannot run the ClusterClass's
// patches; the cluster changes though no machine does. Apply writes them by name into the
// Cluster's list (the others as they were, a new one appended), the version untouched, and waits
// for TopologyReconciled at the new generation.
func TestTopologyVariablesMerge(t *testing.T) {
	c, writes := topologyWorld(t, nil)
	p, up := &owners.Planner{Client: c}, updater(c)
	change := inplace.Change{TopologyVariables: map[string]json.RawMessage{"note": json.RawMessage(`"b"`), "count": json.RawMessage(`3`)}}
	fp, err := p.PlanFleet(t.Context(), owners.FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: owners.Pick{ControlPlane: true}, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	cp := fp.Cluster("c")
	want := []owners.VariableChange{{Name: "count", From: "", To: "3"}, {Name: "note", From: `"a"`, To: `"b"`}}
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

	if _, err := up.ApplyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond}); err != nil {
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
	_, err = up.VerifyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrNotVerified) || !strings.Contains(errText(err), "observedGeneration 1 behind generation 2") {
		t.Fatalf("verify before the topology controller reconciled: %v; want not verified, waiting for the Cluster's generation", err)
	}
	// Someone sets the variable back: the wait says so.
	edit(t, c, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "note", "value": "a"}}, "spec", "topology", "variables")
	})
	_, err = up.VerifyCluster(t.Context(), cp, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
	if !strings.Contains(errText(err), `topology variable note is "a", want "b"`) {
		t.Errorf("verify after the variable was set back: %v; want it named", err)
	}

	// Planned again once applied: nothing changes.
	c2, _ := topologyWorld(t, nil)
	edit(t, c2, clusterGVK, "c", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "note", "value": "b"}, map[string]any{"name": "count", "value": int64(3)}}, "spec", "topology", "variables")
	})
	fp, err = (&owners.Planner{Client: c2}).PlanFleet(t.Context(), owners.FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: owners.Pick{ControlPlane: true}, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if cp := fp.Cluster("c"); len(cp.Topology.Variables) != 0 || cp.Changes() {
		t.Errorf("variables already set: changes %v; want none", cp.Topology.Variables)
	}
}

// The controllers write a Cluster's status all through a rollout: one such write between the
// plan's read and its dry run does not fail the plan (the dry run is not guarded by the
// resourceVersion read), while apply's write still is.
func TestTopologyDryRunSurvivesStatusWrites(t *testing.T) {
	c, _ := topologyWorld(t, nil)
	var guarded []bool
	busy := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, patch client.Patch, opts ...client.PatchOption) error {
			raw, err := patch.Data(o)
			if err != nil {
				return err
			}
			guarded = append(guarded, strings.Contains(string(raw), `"resourceVersion"`))
			// A controller writes the Cluster's status meanwhile.
			cl := &unstructured.Unstructured{}
			cl.SetGroupVersionKind(clusterGVK)
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), cl); err != nil {
				return err
			}
			_ = unstructured.SetNestedField(cl.Object, "busy", "status", "phase")
			if err := c.Update(ctx, cl); err != nil {
				return err
			}
			return c.Patch(ctx, o, patch, opts...)
		},
	})
	p, up := &owners.Planner{Client: busy}, updater(busy)
	fp, err := p.PlanFleet(t.Context(), owners.FleetRequest{Namespace: "fleet", Clusters: []string{"c"}, Owners: owners.Pick{ControlPlane: true},
		Change: inplace.Change{TopologyVariables: rawVars(map[string]string{"note": `"b"`})}, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatalf("plan with the controllers writing the Cluster's status: %v", err)
	}
	_, err = up.ApplyCluster(t.Context(), fp.Cluster("c"), ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
	if !strings.Contains(errText(err), "Cluster Changed Since The Plan") {
		t.Errorf("apply of a Cluster changed since the plan: %v; want refused", err)
	}
	if !reflect.DeepEqual(guarded, []bool{false, true}) {
		t.Errorf("resourceVersion in the dry run, the write: %v; want false, true", guarded)
	}
}
