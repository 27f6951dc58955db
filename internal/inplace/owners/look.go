package owners

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

// AnnotationRevision records on the owner the revision (see Revision) last written to it.
const AnnotationRevision = "gradual.dev/inplace-update"

// inPlaceAnnotationPrefix marks CAPI's in-place bookkeeping on a Machine (e.g.
// in-place-updates.internal.cluster.x-k8s.io/update-in-progress): a Machine carrying one is
// still being updated.
const inPlaceAnnotationPrefix = "in-place-updates.internal.cluster.x-k8s.io/"

// Statuses of a machine after an update (ownerupdate.Updater.Execute) or a look at it (Look).
const (
	// StatusUpdated: the same Machine (same UID) is now up to date with the change; also one
	// planned unchanged that Cluster API moved to a new MachineSet and updated in place (a
	// change the preview could not see: a topology variable the ClusterClass's patches read).
	StatusUpdated = "updated"
	// StatusUnchanged: nothing of the machine changed.
	StatusUnchanged = "unchanged"
	// StatusReplaced: the Machine is gone; Cluster API replaced it.
	StatusReplaced = "replaced"
	// StatusCreated: a Machine Cluster API created during the update (a replacement).
	StatusCreated = "created"
	// StatusFailed: the update did not finish (see the error).
	StatusFailed = "failed"
	// StatusNotStarted: nothing was written (the apply stopped before the owner changed).
	StatusNotStarted = "not-started"
)

// Look is one observation of an owner and its machines (Reader.LookAt).
type Look struct {
	// machines by name → UID.
	machines map[string]string
	// moved are the machines of machines now in another MachineSet than when planned.
	moved map[string]bool
	// Problems are what is not yet as desired, sorted; none when the owner is up to date.
	Problems []string
}

// machineSetLabel names a MachineDeployment's Machine's MachineSet (clusterv1.MachineSetNameLabel).
const machineSetLabel = "cluster.x-k8s.io/set-name"

// Status is every machine's status by name as this look found it: replaced (gone, or another
// UID), unchanged, updated, or created (a Machine the plan did not know).
func (l *Look) Status(res *PlanResult) map[string]string {
	st := map[string]string{}
	for _, m := range res.Machines {
		uid, ok := l.machines[m.Plan.Machine]
		switch {
		case !ok || uid != string(m.Current.Machine.GetUID()):
			st[m.Plan.Machine] = StatusReplaced
		case m.Plan.Strategy == inplace.StrategyUnchanged && !l.moved[m.Plan.Machine]:
			st[m.Plan.Machine] = StatusUnchanged
		default:
			st[m.Plan.Machine] = StatusUpdated
		}
	}
	for name := range l.machines {
		if _, ok := st[name]; !ok {
			st[name] = StatusCreated
		}
	}
	return st
}

// ownerProblems lists why an owner is not done rolling out (v1beta2 status fields).
func ownerProblems(u *unstructured.Unstructured, name string) []string {
	var out []string
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed < gen {
		out = append(out, fmt.Sprintf("%s: observedGeneration %d behind generation %d", name, observed, gen))
	}
	replicas, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		return out
	}
	for _, f := range []string{"replicas", "upToDateReplicas", "availableReplicas"} {
		if v, _, _ := unstructured.NestedInt64(u.Object, "status", f); v != replicas {
			out = append(out, fmt.Sprintf("%s: status.%s %d, want %d", name, f, v, replicas))
		}
	}
	return out
}

// machineProblem says why a Machine is not up to date by CAPI's account; "" when it is.
func machineProblem(u *unstructured.Unstructured, version string) string {
	if v, _, _ := unstructured.NestedString(u.Object, "spec", "version"); version != "" && v != version {
		return fmt.Sprintf("spec.version %s, want %s", v, version)
	}
	for k := range u.GetAnnotations() {
		if strings.HasPrefix(k, inPlaceAnnotationPrefix) {
			return "in-place update in progress (" + k + ")"
		}
	}
	if c := condition(u, "Updating"); c != nil && c["status"] == "True" {
		return fmt.Sprintf("Updating: %v", c["message"])
	}
	if c := condition(u, "UpToDate"); c == nil || c["status"] != "True" {
		msg := "no UpToDate condition"
		if c != nil {
			msg = fmt.Sprintf("UpToDate %v: %v", c["status"], c["message"])
		}
		return msg
	}
	if node, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name"); node == "" {
		return "no Node yet (status.nodeRef)"
	}
	return ""
}

// condition is the v1beta2 condition of that type (status.conditions), nil when absent.
func condition(u *unstructured.Unstructured, t string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m
		}
	}
	return nil
}

func nodeProblem(node *corev1.Node, version string) error {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	switch {
	case !ready:
		return fmt.Errorf("Node %s is not Ready", node.Name)
	case version != "" && node.Status.NodeInfo.KubeletVersion != version:
		return fmt.Errorf("Node %s reports kubelet %s, want %s", node.Name, node.Status.NodeInfo.KubeletVersion, version)
	}
	return nil
}
