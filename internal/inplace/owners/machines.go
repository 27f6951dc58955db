package owners

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// CAPI labels and kinds the machines are found by.
const (
	clusterNameLabel    = "cluster.x-k8s.io/cluster-name"
	deploymentNameLabel = "cluster.x-k8s.io/deployment-name"
	// CAPI's KubeadmControlPlane labels its Machines with both.
	controlPlaneNameLabel = "cluster.x-k8s.io/control-plane-name"
	controlPlaneLabel     = "cluster.x-k8s.io/control-plane"
	capiGroup             = "cluster.x-k8s.io"
	capiVersion           = "v1beta2"
)

var (
	machineGVK           = schema.GroupVersionKind{Group: capiGroup, Version: capiVersion, Kind: "Machine"}
	machineListGVK       = schema.GroupVersionKind{Group: capiGroup, Version: capiVersion, Kind: "MachineList"}
	machineDeploymentGVK = schema.GroupVersionKind{Group: capiGroup, Version: capiVersion, Kind: "MachineDeployment"}
)

// Selection says which owner an update changes, and so which Machines it concerns: those of
// Cluster in Namespace, either of one MachineDeployment or of one KubeadmControlPlane. Machines
// picked by label are not supported: Cluster API updates machines only through their owner.
type Selection struct {
	Namespace string
	Cluster   string
	// MachineDeployment picks the machines of one MachineDeployment; it excludes Labels.
	MachineDeployment string
	// ControlPlane picks the machines of one KubeadmControlPlane: those labelled
	// cluster.x-k8s.io/control-plane-name=ControlPlane and cluster.x-k8s.io/control-plane.
	// It excludes MachineDeployment.
	ControlPlane string
	// Topology: the owner belongs to a managed topology (the Cluster's spec.topology) and is
	// changed through the Cluster's spec.topology.version, never written itself (see Topology).
	Topology bool
}

func (s Selection) describe() string {
	if s.MachineDeployment != "" {
		return fmt.Sprintf("MachineDeployment %s/%s of cluster %s", s.Namespace, s.MachineDeployment, s.Cluster)
	}
	return fmt.Sprintf("KubeadmControlPlane %s/%s of cluster %s", s.Namespace, s.ControlPlane, s.Cluster)
}

// readMachines lists the selected Machines, sorted by name, each with the objects it refers to;
// Machines being deleted are left out.
func readMachines(ctx context.Context, c client.Client, sel Selection) ([]inplace.Objects, error) {
	return readMachinesNoting(ctx, c, sel, nil)
}

// listMachines is readMachines that also names the Machines being deleted.
func listMachines(ctx context.Context, c client.Client, sel Selection) ([]inplace.Objects, []string, error) {
	var deleting []string
	objs, err := readMachinesNoting(ctx, c, sel, &deleting)
	return objs, deleting, err
}

func readMachinesNoting(ctx context.Context, c client.Client, sel Selection, deleting *[]string) ([]inplace.Objects, error) {
	set := labels.Set{clusterNameLabel: sel.Cluster}
	if sel.ControlPlane != "" {
		set[controlPlaneNameLabel] = sel.ControlPlane
		set[controlPlaneLabel] = ""
	}
	if sel.MachineDeployment != "" {
		set[deploymentNameLabel] = sel.MachineDeployment
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(machineListGVK)
	if err := c.List(ctx, list, client.InNamespace(sel.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(set)}); err != nil {
		return nil, usererr.Wrap(err, "Cannot List Machines", fmt.Sprintf("Listing %s failed.", sel.describe()))
	}
	items := list.Items
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	var out []inplace.Objects
	for i := range items {
		m := &items[i]
		if cn, _, _ := unstructured.NestedString(m.Object, "spec", "clusterName"); cn != sel.Cluster {
			continue
		}
		if m.GetDeletionTimestamp() != nil {
			if deleting != nil {
				*deleting = append(*deleting, m.GetName())
			}
			continue // on its way out: CAPI would not update it either
		}
		objs := inplace.Objects{Machine: m}
		infra, err := readMachineRef(ctx, c, m, "spec", "infrastructureRef")
		if err != nil {
			return nil, err
		}
		if infra == nil {
			return nil, usererr.New("Machine Without Infrastructure", fmt.Sprintf("Machine %s/%s has no spec.infrastructureRef.", m.GetNamespace(), m.GetName()))
		}
		objs.InfrastructureMachine = infra
		if objs.BootstrapConfig, err = readMachineRef(ctx, c, m, "spec", "bootstrap", "configRef"); err != nil {
			return nil, err
		}
		out = append(out, objs)
	}
	return out, nil
}

// readMachineRef reads the object a Machine's reference at fields names; nil when absent.
func readMachineRef(ctx context.Context, c client.Client, m *unstructured.Unstructured, fields ...string) (*unstructured.Unstructured, error) {
	ref, found, _ := unstructured.NestedMap(m.Object, fields...)
	if !found || ref["name"] == nil {
		return nil, nil
	}
	return readRef(ctx, c, m.GetNamespace(), "Machine "+m.GetName(), ref, strings.Join(fields, "."))
}

// readRef reads the object a contract reference names: v1beta2's {apiGroup, kind, name}, or an
// older {apiVersion, kind, name}, in namespace; holder and field say where the reference is.
func readRef(ctx context.Context, c client.Client, namespace, holder string, ref map[string]any, field string) (*unstructured.Unstructured, error) {
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	group, _ := ref["apiGroup"].(string)
	if av, ok := ref["apiVersion"].(string); ok && group == "" {
		gv, err := schema.ParseGroupVersion(av)
		if err == nil {
			group = gv.Group
		}
	}
	what := fmt.Sprintf("%s %s/%s (%s of %s)", kind, namespace, name, field, holder)
	mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, usererr.New("Unknown Kind", fmt.Sprintf("The management cluster serves no kind %s in group %q, which %s refers to.", kind, group, what))
		}
		return nil, usererr.Wrap(err, "Cannot Read Object", "Resolving "+what+" failed.")
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usererr.New("Object Not Found", what+" does not exist.")
		}
		return nil, usererr.Wrap(err, "Cannot Read Object", "Reading "+what+" failed.")
	}
	return u, nil
}
