package owners

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

func machineWith(name string, labels map[string]string) Machine {
	u := &unstructured.Unstructured{}
	u.SetName(name)
	u.SetLabels(labels)
	return Machine{Current: inplace.Objects{Machine: u}, Plan: inplace.MachinePlan{Machine: name, Strategy: inplace.StrategyInPlace}}
}

func check(name, cluster string, selector map[string]string, checks clusterv1.MachineHealthCheckChecks) clusterv1.MachineHealthCheck {
	return clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: name},
		Spec:       clusterv1.MachineHealthCheckSpec{ClusterName: cluster, Selector: metav1.LabelSelector{MatchLabels: selector}, Checks: checks},
	}
}

// A MachineHealthCheck selects machines as Cluster API does (its selector and the cluster's
// name label): the note names each check that selects a machine updated in place, with its
// timeouts; checks of other clusters, other machines, or whose selector does not parse are
// left out.
func TestMHCNotes(t *testing.T) {
	const cl = "mem-1"
	md := map[string]string{clusterv1.ClusterNameLabel: cl, clusterv1.MachineDeploymentNameLabel: "mem-1-md-0"}
	cp := map[string]string{clusterv1.ClusterNameLabel: cl, clusterv1.MachineControlPlaneLabel: ""}
	inPlace := []Machine{machineWith("mem-1-md-0-b", md), machineWith("mem-1-md-0-a", md), machineWith("mem-1-cp-x", cp)}
	checks := []clusterv1.MachineHealthCheck{
		check("workers", cl, map[string]string{clusterv1.MachineDeploymentNameLabel: "mem-1-md-0"}, clusterv1.MachineHealthCheckChecks{
			UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{Type: "Ready", Status: "Unknown", TimeoutSeconds: ptr.To[int32](300)}},
		}),
		check("cp", cl, map[string]string{clusterv1.MachineControlPlaneLabel: ""}, clusterv1.MachineHealthCheckChecks{
			NodeStartupTimeoutSeconds:  ptr.To[int32](0),
			UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{Type: "Updating", Status: "True", TimeoutSeconds: ptr.To[int32](30)}},
		}),
		// Another cluster's machines carry another cluster-name label.
		check("other-cluster", "mem-2", map[string]string{clusterv1.MachineDeploymentNameLabel: "mem-1-md-0"}, clusterv1.MachineHealthCheckChecks{}),
		check("other-md", cl, map[string]string{clusterv1.MachineDeploymentNameLabel: "mem-1-md-1"}, clusterv1.MachineHealthCheckChecks{}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "bad-selector"}, Spec: clusterv1.MachineHealthCheckSpec{ClusterName: cl,
			Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}}},
	}
	notes := mhcNotes(checks, inPlace)
	if len(notes) != 2 {
		t.Fatalf("notes %q; want two (cp, workers)", notes)
	}
	for _, want := range []string{"MachineHealthCheck capi/cp (no node startup timeout, Machine Updating=True for 30s) selects machine mem-1-cp-x,",
		"Cluster API v1.14.2 does not hold remediation back", "cluster.x-k8s.io/skip-remediation"} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("note %q lacks %q", notes[0], want)
		}
	}
	if want := "MachineHealthCheck capi/workers (node startup timeout 10m0s, Node Ready=Unknown for 5m0s) selects machines mem-1-md-0-a, mem-1-md-0-b,"; !strings.Contains(notes[1], want) {
		t.Errorf("note %q lacks %q", notes[1], want)
	}
	// No machine in place, no note: healthCheckNotes passes only those.
	if got := mhcNotes(checks, nil); len(got) != 0 {
		t.Errorf("no machines: %q", got)
	}
}

// healthCheckNotes reads nothing when no machine is updated in place.
func TestHealthCheckNotesOnlyForInPlace(t *testing.T) {
	m := machineWith("m", nil)
	m.Plan.Strategy = inplace.StrategyRolling
	if got := healthCheckNotes(t.Context(), nil, &PlanResult{Machines: []Machine{m}}); got != nil {
		t.Errorf("notes %q for a plan with no machine in place", got)
	}
}
