package owners

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Owner kinds.
const (
	KindMachineDeployment   = "MachineDeployment"
	KindKubeadmControlPlane = "KubeadmControlPlane"
)

var (
	kcpGVK     = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: KindKubeadmControlPlane}
	clusterGVK = schema.GroupVersionKind{Group: capiGroup, Version: capiVersion, Kind: "Cluster"}
)

// pausedAnnotation pauses reconciliation of any CAPI object that carries it.
const pausedAnnotation = "cluster.x-k8s.io/paused"

// Owner is the object whose desired state an update changes, as it is and as the change wants
// it, with the templates the change creates.
type Owner struct {
	Kind string
	// Current is the owner as read; Desired is Current with the change applied.
	Current, Desired *unstructured.Unstructured
	// Templates are the rotated templates to create before Desired is written (the owner refers
	// to them by their new names); empty when no template changes.
	Templates []*unstructured.Unstructured
	// MaxSurge is the MachineDeployment's rollout maxSurge resolved against its replicas; -1
	// when unknown (a control plane).
	MaxSurge int
	Replicas int64
	// SetCurrent and SetDesired are what CAPI sends CanUpdateMachineSet for a MachineDeployment:
	// a MachineSet made from its template (in Machine) and the infrastructure and bootstrap
	// templates, before and after the change. Empty for a control plane.
	SetCurrent, SetDesired inplace.Objects
}

// Name is "MachineDeployment ns/name" or "KubeadmControlPlane ns/name".
func (o *Owner) Name() string {
	return fmt.Sprintf("%s %s/%s", o.Kind, o.Current.GetNamespace(), o.Current.GetName())
}

// Changes reports whether Desired differs from Current (spec) or templates are created.
func (o *Owner) Changes() (bool, error) {
	p, err := SpecPatch(o.Current.Object, o.Desired.Object)
	return p != nil || len(o.Templates) > 0, err
}

// readOwner reads the selected owner and works out its desired state. Problems a plan must
// refuse (paused, OnDelete, a change the owner cannot carry) are usererr.Errors.
func readOwner(ctx context.Context, c client.Client, sel Selection, change inplace.Change) (*Owner, error) {
	o := &Owner{MaxSurge: -1}
	u := &unstructured.Unstructured{}
	switch {
	case sel.MachineDeployment != "":
		o.Kind = KindMachineDeployment
		u.SetGroupVersionKind(machineDeploymentGVK)
		u.SetName(sel.MachineDeployment)
	case sel.ControlPlane != "":
		o.Kind = KindKubeadmControlPlane
		u.SetGroupVersionKind(kcpGVK)
		u.SetName(sel.ControlPlane)
	default:
		return nil, usererr.New("No Owner Selected", "Cluster API updates machines in place only through their owner: set machine_deployment or control_plane.")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: u.GetName()}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usererr.New(o.Kind+" Not Found",
				fmt.Sprintf("No %s %s exists in namespace %q of the management cluster.", o.Kind, u.GetName(), sel.Namespace))
		}
		return nil, usererr.Wrap(err, "Cannot Read "+o.Kind, fmt.Sprintf("Reading %s %s/%s failed.", o.Kind, sel.Namespace, u.GetName()))
	}
	o.Current = u
	if o.Kind == KindMachineDeployment {
		if cn, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName"); cn != sel.Cluster {
			return nil, usererr.New("MachineDeployment Of Another Cluster",
				fmt.Sprintf("MachineDeployment %s/%s belongs to cluster %q, not %q.", sel.Namespace, sel.MachineDeployment, cn, sel.Cluster))
		}
	}
	if err := checkOwner(ctx, c, sel, o); err != nil {
		return nil, err
	}
	var err error
	switch o.Kind {
	case KindMachineDeployment:
		if err = desiredMachineDeployment(ctx, c, o, change); err == nil {
			err = machineSetObjects(ctx, c, o)
		}
	default:
		err = desiredControlPlane(ctx, c, o, change)
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// machineSetObjects fills SetCurrent and SetDesired: the MachineSet CAPI would make from the
// MachineDeployment's template now and after the change, and the templates each refers to (the
// rotated ones for the desired side).
func machineSetObjects(ctx context.Context, c client.Client, o *Owner) error {
	for _, side := range []struct {
		md  *unstructured.Unstructured
		out *inplace.Objects
	}{{o.Current, &o.SetCurrent}, {o.Desired, &o.SetDesired}} {
		ms := &unstructured.Unstructured{Object: map[string]any{}}
		ms.SetAPIVersion(capiGroup + "/" + capiVersion)
		ms.SetKind("MachineSet")
		ms.SetNamespace(side.md.GetNamespace())
		ms.SetName(side.md.GetName())
		ms.SetLabels(side.md.GetLabels())
		spec := map[string]any{}
		for _, k := range []string{"clusterName", "replicas", "template"} {
			if v, ok, _ := unstructured.NestedFieldCopy(side.md.Object, "spec", k); ok {
				spec[k] = v
			}
		}
		ms.Object["spec"] = spec
		// The references to the templates are compared through the templates themselves (their
		// content), as CAPI does: a rotated template's new name is no change of its own.
		if side.md == o.Desired {
			for _, ref := range [][]string{{"spec", "template", "spec", "infrastructureRef"}, {"spec", "template", "spec", "bootstrap", "configRef"}} {
				if cur, ok, _ := unstructured.NestedFieldCopy(o.Current.Object, ref...); ok {
					_ = unstructured.SetNestedField(ms.Object, cur, append([]string{"spec"}, ref[1:]...)...)
				}
			}
		}
		side.out.Machine = ms
		for _, r := range []struct {
			ref []string
			set func(*unstructured.Unstructured)
		}{
			{[]string{"spec", "template", "spec", "infrastructureRef"}, func(u *unstructured.Unstructured) { side.out.InfrastructureMachine = u }},
			{[]string{"spec", "template", "spec", "bootstrap", "configRef"}, func(u *unstructured.Unstructured) { side.out.BootstrapConfig = u }},
		} {
			refMap, found, _ := unstructured.NestedMap(side.md.Object, r.ref...)
			if !found || refMap["name"] == nil {
				continue
			}
			name, _ := refMap["name"].(string)
			if t := o.template(name); t != nil {
				r.set(t)
				continue
			}
			t, err := readRef(ctx, c, side.md.GetNamespace(), o.Name(), refMap, strings.Join(r.ref, "."))
			if err != nil {
				return err
			}
			r.set(t)
		}
	}
	return nil
}

// template is the rotated template of that name, nil when none is.
func (o *Owner) template(name string) *unstructured.Unstructured {
	for _, t := range o.Templates {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

// ErrClusterSkippable marks the refusals that concern one cluster of a fleet and are fixed
// there (the owner paused or rolling out OnDelete, the cluster paused or not initialized): a
// fleet plan skips that cluster with the reason instead of failing as a whole.
var ErrClusterSkippable = errors.New("the cluster is skipped")

// checkOwner refuses owners Cluster API would not update as asked: paused ones (nothing would
// happen until someone unpauses them) and MachineDeployments with the OnDelete strategy
// (machines change only when someone deletes them; never in place).
func checkOwner(ctx context.Context, c client.Client, sel Selection, o *Owner) error {
	u := o.Current
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	if _, ok := u.GetAnnotations()[pausedAnnotation]; ok || paused {
		return engine.Mark(ErrClusterSkippable, usererr.New(o.Kind+" Paused",
			fmt.Sprintf("%s is paused (spec.paused or the %s annotation): Cluster API would not roll the change out. Unpause it, then plan again.", o.Name(), pausedAnnotation)))
	}
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: sel.Cluster}, cl); err != nil {
		if apierrors.IsNotFound(err) {
			return usererr.New("Cluster Not Found", fmt.Sprintf("No Cluster %s exists in namespace %q of the management cluster.", sel.Cluster, sel.Namespace))
		}
		return usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", sel.Namespace, sel.Cluster))
	}
	if !sel.Topology {
		if err := refuseTopologyOwned(cl, o); err != nil {
			return err
		}
	}
	if paused, _, _ := unstructured.NestedBool(cl.Object, "spec", "paused"); paused {
		return engine.Mark(ErrClusterSkippable, usererr.New("Cluster Paused", fmt.Sprintf("Cluster %s/%s is paused: Cluster API would not roll the change out. Unpause it, then plan again.", sel.Namespace, sel.Cluster)))
	}
	if init, _, _ := unstructured.NestedBool(cl.Object, "status", "initialization", "controlPlaneInitialized"); !init {
		return engine.Mark(ErrClusterSkippable, usererr.New("Cluster Not Ready",
			fmt.Sprintf("Cluster %s/%s has no initialized control plane yet (status.initialization.controlPlaneInitialized): its machines cannot be updated, and their Nodes not verified. Plan again once it is up.", sel.Namespace, sel.Cluster)))
	}
	replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	o.Replicas = replicas
	if o.Kind != KindMachineDeployment {
		// A KubeadmControlPlane's maxSurge is 1 (its default) or 0 (allowed from 3 replicas):
		// with 1 it creates a new Machine before it updates or deletes an old one.
		o.MaxSurge = resolveSurge(u, replicas)
		return nil
	}
	if t, _, _ := unstructured.NestedString(u.Object, "spec", "rollout", "strategy", "type"); t == "OnDelete" {
		return engine.Mark(ErrClusterSkippable, usererr.New("MachineDeployment Uses OnDelete",
			fmt.Sprintf("%s has rollout strategy OnDelete: Cluster API changes its machines only when someone deletes them, never in place. "+
				"Use the RollingUpdate strategy with maxSurge 0 and maxUnavailable of at least 1 for in-place updates.", o.Name())))
	}
	o.MaxSurge = resolveSurge(u, replicas)
	return nil
}

// topologyOwnedLabel marks the objects Cluster API's topology controller made from a
// ClusterClass (clusterv1.ClusterTopologyOwnedLabel; this package reads Cluster API objects as
// unstructured and does not import its API module).
const topologyOwnedLabel = "topology.cluster.x-k8s.io/owned"

// refuseTopologyOwned refuses an owner that the topology controller of a managed Cluster
// (spec.topology) made: that controller computes the owner's version and template references
// from the Cluster's topology and its ClusterClass and puts back whatever else writes them, so a
// write here would be reverted behind the plan's back. Such clusters are upgraded through
// Cluster.spec.topology. An owner the topology did not make (no label) may be written as any
// other.
func refuseTopologyOwned(cluster *unstructured.Unstructured, o *Owner) error {
	topology, _, _ := unstructured.NestedMap(cluster.Object, "spec", "topology")
	if len(topology) == 0 {
		return nil
	}
	if _, owned := o.Current.GetLabels()[topologyOwnedLabel]; !owned {
		return nil
	}
	class, _, _ := unstructured.NestedString(topology, "classRef", "name")
	if class == "" {
		class, _, _ = unstructured.NestedString(topology, "class") // v1beta1 Clusters
	}
	field := "`machine_deployment` (or `machine_deployment_selector` without `update_control_plane`)"
	if o.Kind == KindKubeadmControlPlane {
		field = "`control_plane`"
	}
	return usererr.New("Owner Managed By A ClusterClass",
		fmt.Sprintf("Cluster %s/%s is built from ClusterClass %q (spec.topology), and its topology controller manages %s (label %s): "+
			"it would put back the version and templates this resource writes. %s picks it; pick owners the topology does not manage, "+
			"or upgrade the whole cluster through its topology: set `update_control_plane = true` (with `cluster`, `names` or `selector`) and `version`, "+
			"and this resource writes spec.topology.version; templates change through the ClusterClass. "+
			"Cluster API then updates the control plane first and the MachineDeployments after, in place where the update extensions allow.",
			cluster.GetNamespace(), cluster.GetName(), class, o.Name(), topologyOwnedLabel, field))
}

// resolveSurge is the MachineDeployment's maxSurge as a number of machines (CAPI's default is 1;
// a percentage rounds up, as CAPI does for surge).
func resolveSurge(u *unstructured.Unstructured, replicas int64) int {
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")
	if !found || v == nil {
		return 1
	}
	var is intstr.IntOrString
	switch x := v.(type) {
	case int64:
		is = intstr.FromInt(int(x))
	case float64:
		is = intstr.FromInt(int(x))
	case string:
		is = intstr.FromString(x)
	default:
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&is, int(replicas), true)
	if err != nil {
		return 1
	}
	return n
}

// desiredMachineDeployment sets the template's version, merges the machine patch into the
// template's spec, and rotates the infrastructure and bootstrap templates the patches change.
func desiredMachineDeployment(ctx context.Context, c client.Client, o *Owner, change inplace.Change) error {
	d := o.Current.DeepCopy()
	spec, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "template", "spec")
	if len(change.MachineSpec) > 0 {
		merged, err := inplace.MergeSpec(spec, change.MachineSpec)
		if err != nil {
			return usererr.Wrap(err, "Change Does Not Apply", "The machine spec patch cannot be merged into the template of "+o.Name()+".")
		}
		if err := unstructured.SetNestedField(d.Object, merged, "spec", "template", "spec"); err != nil {
			return err
		}
	}
	if change.Version != "" {
		if err := unstructured.SetNestedField(d.Object, change.Version, "spec", "template", "spec", "version"); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		patch []byte
		ref   []string
		what  string
	}{
		{change.InfrastructureMachineSpec, []string{"spec", "template", "spec", "infrastructureRef"}, "infrastructure"},
		{change.BootstrapConfigSpec, []string{"spec", "template", "spec", "bootstrap", "configRef"}, "bootstrap"},
	} {
		if len(r.patch) == 0 {
			continue
		}
		if err := rotate(ctx, c, o, d, r.patch, r.ref, r.what); err != nil {
			return err
		}
	}
	o.Desired = d
	return nil
}

// desiredControlPlane sets the KubeadmControlPlane's version, merges the bootstrap patch into
// its kubeadmConfigSpec and rotates its machine template when the infrastructure patch changes
// it. A KubeadmControlPlane has no Machine spec of its own to patch.
func desiredControlPlane(ctx context.Context, c client.Client, o *Owner, change inplace.Change) error {
	if len(change.MachineSpec) > 0 {
		return usererr.New("Machine Spec Patch Not Supported For A Control Plane",
			fmt.Sprintf("%s carries no Machine template spec to patch: a control plane takes version, infrastructure_machine_spec_patch and bootstrap_config_spec_patch (merged into spec.kubeadmConfigSpec).", o.Name()))
	}
	d := o.Current.DeepCopy()
	if change.Version != "" {
		if err := unstructured.SetNestedField(d.Object, change.Version, "spec", "version"); err != nil {
			return err
		}
	}
	if len(change.BootstrapConfigSpec) > 0 {
		spec, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "kubeadmConfigSpec")
		merged, err := inplace.MergeSpec(spec, change.BootstrapConfigSpec)
		if err != nil {
			return usererr.Wrap(err, "Change Does Not Apply", "The bootstrap config spec patch cannot be merged into spec.kubeadmConfigSpec of "+o.Name()+".")
		}
		if err := unstructured.SetNestedField(d.Object, merged, "spec", "kubeadmConfigSpec"); err != nil {
			return err
		}
	}
	if len(change.InfrastructureMachineSpec) > 0 {
		if err := rotate(ctx, c, o, d, change.InfrastructureMachineSpec, []string{"spec", "machineTemplate", "spec", "infrastructureRef"}, "infrastructure"); err != nil {
			return err
		}
	}
	o.Desired = d
	return nil
}

// rotate reads the template the reference at ref of desired names, applies patch to a copy
// under a content-hashed name and points the reference at it (the template itself is never
// edited). Nothing happens when the patch changes nothing.
func rotate(ctx context.Context, c client.Client, o *Owner, desired *unstructured.Unstructured, patch []byte, ref []string, what string) error {
	refMap, found, _ := unstructured.NestedMap(desired.Object, ref...)
	if !found {
		return usererr.New("No "+strings.ToUpper(what[:1])+what[1:]+" Template",
			fmt.Sprintf("%s has no %s: there is no %s template to patch.", o.Name(), strings.Join(ref, "."), what))
	}
	tmpl, err := readRef(ctx, c, o.Current.GetNamespace(), o.Name(), refMap, strings.Join(ref, "."))
	if err != nil {
		return err
	}
	rotated, changed, err := inplace.RotateTemplate(tmpl, patch)
	if err != nil {
		return usererr.Wrap(err, "Change Does Not Apply", fmt.Sprintf("The %s spec patch cannot be applied to %s %s/%s.", what, tmpl.GetKind(), tmpl.GetNamespace(), tmpl.GetName()))
	}
	if !changed {
		return nil
	}
	if err := unstructured.SetNestedField(desired.Object, rotated.GetName(), append(slicesClone(ref), "name")...); err != nil {
		return err
	}
	o.Templates = append(o.Templates, rotated)
	return nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
