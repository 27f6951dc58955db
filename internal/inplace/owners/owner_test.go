package owners

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

var mdSelection = Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md-0"}

// Owners Cluster API would not update as asked are refused at plan, before anything is written.
func TestPlanRefusesOwnersCAPIWouldNotUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    map[string]any
		ann     map[string]string
		summary string
	}{
		{"paused", map[string]any{"paused": true}, nil, "MachineDeployment Paused"},
		{"paused by annotation", nil, map[string]string{pausedAnnotation: ""}, "MachineDeployment Paused"},
		{"OnDelete", map[string]any{"rollout": map[string]any{"strategy": map[string]any{"type": "OnDelete"}}}, nil, "MachineDeployment Uses OnDelete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, writes := world(t, tc.spec, tc.ann)
			_, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: inplace.Change{Version: "v1.34.1"}})
			u, ok := usererr.As(err)
			if !ok || u.Summary != tc.summary {
				t.Fatalf("plan error %v, want %q", err, tc.summary)
			}
			if len(*writes) > 0 {
				t.Errorf("writes %v", *writes)
			}
		})
	}
	for _, tc := range []struct {
		name          string
		paused, ready bool
		summary       string
	}{{"cluster paused", true, true, "Cluster Paused"}, {"cluster not ready", false, false, "Cluster Not Ready"}} {
		t.Run(tc.name, func(t *testing.T) {
			c, writes := worldWithCluster(t, nil, nil, tc.paused, tc.ready)
			_, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: inplace.Change{Version: "v1.34.1"}})
			if u, ok := usererr.As(err); !ok || u.Summary != tc.summary {
				t.Fatalf("plan error %v, want %q", err, tc.summary)
			}
			if len(*writes) > 0 {
				t.Errorf("writes %v", *writes)
			}
		})
	}
	// A managed topology's owners are refused; one the topology did not make (no label) is not.
	for _, tc := range []struct {
		name     string
		topology map[string]any
		owned    bool
		summary  string
	}{
		{"topology-owned MachineDeployment", map[string]any{"classRef": map[string]any{"name": "quick-start"}, "version": "v1.34.0"}, true, "Owner Managed By A ClusterClass"},
		{"v1beta1 class field", map[string]any{"class": "quick-start", "version": "v1.34.0"}, true, "Owner Managed By A ClusterClass"},
		{"MachineDeployment outside the topology", map[string]any{"classRef": map[string]any{"name": "quick-start"}}, false, ""},
		{"label without a topology", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, writes := world(t, nil, nil)
			cl := obj(clusterGVK, "c", map[string]any{})
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(cl), cl); err != nil {
				t.Fatal(err)
			}
			if tc.topology != nil {
				if err := unstructured.SetNestedMap(cl.Object, tc.topology, "spec", "topology"); err != nil {
					t.Fatal(err)
				}
				if err := c.Update(t.Context(), cl); err != nil {
					t.Fatal(err)
				}
			}
			if tc.owned {
				md := obj(machineDeploymentGVK, "md-0", map[string]any{})
				if err := c.Get(t.Context(), client.ObjectKeyFromObject(md), md); err != nil {
					t.Fatal(err)
				}
				md.SetLabels(map[string]string{topologyOwnedLabel: ""})
				if err := c.Update(t.Context(), md); err != nil {
					t.Fatal(err)
				}
			}
			*writes = nil
			_, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: inplace.Change{Version: "v1.34.1"}})
			if tc.summary == "" {
				if err != nil {
					t.Fatalf("plan error %v, want none", err)
				}
				return
			}
			u, ok := usererr.As(err)
			if !ok || u.Summary != tc.summary {
				t.Fatalf("plan error %v, want %q", err, tc.summary)
			}
			for _, want := range []string{`ClusterClass "quick-start"`, "MachineDeployment fleet/md-0", "spec.topology.version", "`machine_deployment`"} {
				if !strings.Contains(u.Detail, want) {
					t.Errorf("detail %q does not say %q", u.Detail, want)
				}
			}
			if len(*writes) > 0 {
				t.Errorf("writes %v", *writes)
			}
		})
	}
	t.Run("selector without owner", func(t *testing.T) {
		c, _ := world(t, nil, nil)
		_, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: Selection{Namespace: "fleet", Cluster: "c"}, Change: inplace.Change{Version: "v1.34.1"}})
		if u, ok := usererr.As(err); !ok || u.Summary != "No Owner Selected" {
			t.Fatalf("plan error %v", err)
		}
	})
}

// maxSurge > 0 makes CAPI replace machines an extension covers: with maxSurge ≥ replicas all
// of them, else up to maxSurge (which the plan cannot name). A KubeadmControlPlane works the same
// way (CAPI's KCP scales up by maxSurge before it updates in place or deletes).
func TestApplySurge(t *testing.T) {
	inPlace := inplace.MachinePlan{Machine: "m", Strategy: inplace.StrategyInPlace, Extensions: []string{"ext"}}
	for _, tc := range []struct {
		kind     string
		surge    int
		replicas int64
		fallback inplace.Fallback
		want     inplace.Strategy
	}{
		{KindMachineDeployment, 0, 1, inplace.FallbackNone, inplace.StrategyInPlace},
		{KindMachineDeployment, 1, 1, inplace.FallbackNone, inplace.StrategyBlocked},
		{KindMachineDeployment, 1, 1, inplace.FallbackRolling, inplace.StrategyRolling},
		{KindMachineDeployment, 1, 3, inplace.FallbackNone, inplace.StrategyBlocked},
		{KindMachineDeployment, 1, 3, inplace.FallbackRolling, inplace.StrategyInPlace},
		{KindKubeadmControlPlane, 1, 1, inplace.FallbackRolling, inplace.StrategyRolling},
		{KindKubeadmControlPlane, 1, 3, inplace.FallbackNone, inplace.StrategyBlocked},
		{KindKubeadmControlPlane, 0, 3, inplace.FallbackNone, inplace.StrategyInPlace},
	} {
		gvk := machineDeploymentGVK
		if tc.kind == KindKubeadmControlPlane {
			gvk = kcpGVK
		}
		owner := &Owner{Kind: tc.kind, Current: obj(gvk, "o", map[string]any{}), MaxSurge: tc.surge, Replicas: tc.replicas}
		got := applySurge(inPlace, owner, tc.fallback)
		if got.Strategy != tc.want {
			t.Errorf("%s maxSurge %d, replicas %d, fallback %s: %s, want %s (notes %v)", tc.kind, tc.surge, tc.replicas, tc.fallback, got.Strategy, tc.want, got.Notes)
		}
		if tc.surge > 0 && (len(got.Notes) == 0 || !strings.Contains(got.Notes[0], "maxSurge")) {
			t.Errorf("%s maxSurge %d: notes %v", tc.kind, tc.surge, got.Notes)
		}
		// In place, yet maybe replaced: said apart from the notes, for a fleet plan's attention.
		if mayBe := got.Strategy == inplace.StrategyInPlace && tc.surge > 0; mayBe != strings.Contains(got.MayBeReplaced, "maxSurge") {
			t.Errorf("%s maxSurge %d, replicas %d, fallback %s: MayBeReplaced %q", tc.kind, tc.surge, tc.replicas, tc.fallback, got.MayBeReplaced)
		}
	}
}
