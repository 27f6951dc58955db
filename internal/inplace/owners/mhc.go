package owners

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
)

// Cluster API v1.14.2 does not shield a Machine while it is updated in place from its
// MachineHealthChecks: the MachineHealthCheck controller skips remediation only for paused
// Machines and Machines annotated cluster.x-k8s.io/skip-remediation (shouldSkipRemediation in
// core/reconcilers/machinehealthcheck/machinehealthcheck_targets.go), and neither the
// MachineSet's remediation (core/reconcilers/machineset) nor KubeadmControlPlane's
// (controlplane/kubeadm/reconcilers/kubeadmcontrolplane/remediation.go) looks at an update in
// progress. An update that trips a check (a kubelet restart past a Node condition's timeout, a
// Machine condition the check watches) gets the machine remediated, that is replaced. The
// provider never writes a Machine behind its owner's back, so it does not annotate them; it
// names the checks at plan so that the user can decide (mhcNotes).

var mhcListGVK = schema.GroupVersionKind{Group: clusterv1.GroupVersion.Group, Version: clusterv1.GroupVersion.Version, Kind: "MachineHealthCheckList"}

// healthCheckNotes reads the MachineHealthChecks of the selection's namespace and returns the
// notes of mhcNotes for res's machines planned in place. A failed read is a note of its own:
// the plan does not depend on it.
func healthCheckNotes(ctx context.Context, c client.Client, res *PlanResult) []string {
	var inPlace []Machine
	for _, m := range res.Machines {
		if m.Plan.Strategy == inplace.StrategyInPlace {
			inPlace = append(inPlace, m)
		}
	}
	if len(inPlace) == 0 {
		return nil
	}
	sel := res.Request.Selection
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(mhcListGVK)
	if err := c.List(ctx, list, client.InNamespace(sel.Namespace)); err != nil {
		return []string{fmt.Sprintf("The MachineHealthChecks of namespace %s were not read (%v): one that selects a machine updated in place may remediate (replace) it during the update; Cluster API does not hold remediation back for it.", sel.Namespace, err)}
	}
	var checks []clusterv1.MachineHealthCheck
	for _, u := range list.Items {
		var mhc clusterv1.MachineHealthCheck
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mhc); err != nil {
			continue // not a MachineHealthCheck Cluster API could act on either
		}
		checks = append(checks, mhc)
	}
	return mhcNotes(checks, inPlace)
}

// mhcNotes is one note per MachineHealthCheck that selects a machine of inPlace: its name, the machines, its timeouts, that Cluster API does not shield updating
// machines and what the user can do. Notes are in MachineHealthCheck name order.
func mhcNotes(checks []clusterv1.MachineHealthCheck, inPlace []Machine) []string {
	sort.Slice(checks, func(i, j int) bool { return checks[i].Name < checks[j].Name })
	var notes []string
	for _, mhc := range checks {
		if !mhc.DeletionTimestamp.IsZero() {
			continue
		}
		// As Cluster API selects them: the selector and the cluster's name label
		// (getMachinesFromMHC in core/reconcilers/machinehealthcheck/machinehealthcheck_targets.go).
		selector, err := metav1.LabelSelectorAsSelector(metav1.CloneSelectorAndAddLabel(&mhc.Spec.Selector, clusterv1.ClusterNameLabel, mhc.Spec.ClusterName))
		if err != nil {
			continue // Cluster API fails on it too, remediating nothing
		}
		var matched []string
		for _, m := range inPlace {
			if m.Current.Machine != nil && selector.Matches(labels.Set(m.Current.Machine.GetLabels())) {
				matched = append(matched, m.Current.Machine.GetName())
			}
		}
		if len(matched) == 0 {
			continue
		}
		slices.Sort(matched)
		notes = append(notes, fmt.Sprintf("MachineHealthCheck %s/%s (%s) selects %s, which Cluster API will update in place. "+
			"Cluster API %s does not hold remediation back while a machine is updated in place (it skips only paused Machines and those annotated %s): "+
			"if the update trips one of these checks, the MachineHealthCheck has the machine remediated, that is replaced. "+
			"This provider does not annotate Machines. To keep them, make the timeouts longer than an update takes, limit remediation (spec.remediation.triggerIf), "+
			"or annotate the Machines %s yourself for the update.",
			mhc.Namespace, mhc.Name, describeChecks(mhc.Spec.Checks), plural(len(matched), "machine", "machines")+" "+strings.Join(matched, ", "),
			capiRelease, clusterv1.MachineSkipRemediationAnnotation, clusterv1.MachineSkipRemediationAnnotation))
	}
	return notes
}

// capiRelease is the Cluster API release whose remediation behaviour the note describes.
const capiRelease = "v1.14.2"

// defaultNodeStartupTimeout is Cluster API's default for checks.nodeStartupTimeoutSeconds.
const defaultNodeStartupTimeout = 10 * time.Minute

// describeChecks says what a MachineHealthCheck treats as unhealthy, with its timeouts.
func describeChecks(c clusterv1.MachineHealthCheckChecks) string {
	startup := defaultNodeStartupTimeout
	if c.NodeStartupTimeoutSeconds != nil {
		startup = time.Duration(*c.NodeStartupTimeoutSeconds) * time.Second
	}
	parts := []string{"node startup timeout " + startup.String()}
	if startup == 0 {
		parts[0] = "no node startup timeout"
	}
	for _, n := range c.UnhealthyNodeConditions {
		parts = append(parts, fmt.Sprintf("Node %s=%s for %s", n.Type, n.Status, secs(n.TimeoutSeconds)))
	}
	for _, m := range c.UnhealthyMachineConditions {
		parts = append(parts, fmt.Sprintf("Machine %s=%s for %s", m.Type, m.Status, secs(m.TimeoutSeconds)))
	}
	return strings.Join(parts, ", ")
}

func secs(s *int32) string {
	if s == nil {
		return "0s"
	}
	return (time.Duration(*s) * time.Second).String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
