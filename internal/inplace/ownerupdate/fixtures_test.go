package ownerupdate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners/ownertest"
)

// The fake management cluster the tests build on (ownertest), and the selections they plan.
var (
	obj           = ownertest.Obj
	edit          = ownertest.Edit
	world         = ownertest.World
	topologyWorld = ownertest.TopologyWorld

	kctGVK                      = ownertest.KubeadmConfigTemplateGVK
	kcpGVK                      = ownertest.KubeadmControlPlaneGVK
	clusterGVK                  = ownertest.ClusterGVK
	machineDeploymentGVK        = ownertest.MachineDeploymentGVK
	topologyReconciledCondition = ownertest.TopologyReconciledCondition

	mdSelection    = owners.Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md-0"}
	topologyOwners = owners.Pick{ControlPlane: true, MachineDeployments: labels.SelectorFromSet(labels.Set{"pool": "extra"})}
)

// updater updates through c, reading through c.
func updater(c client.Client) *Updater {
	return &Updater{Client: c, Reader: &owners.Reader{Client: c}}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func rawVars(vars map[string]string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for n, v := range vars {
		out[n] = json.RawMessage(v)
	}
	return out
}

// compactJSON is v as compact JSON.
func compactJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
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
		out = append(out, fmt.Sprintf("%s=%s", m["name"], compactJSON(t, m["value"])))
	}
	return strings.Join(out, " ")
}
