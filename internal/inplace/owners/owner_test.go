package owners

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

var mdSelection = Selection{Namespace: "fleet", Cluster: "c", MachineDeployment: "md-0"}

// The change goes to the owner: the bootstrap template is rotated (a new, content-named
// template; the old one untouched), the MachineDeployment points at it and carries the
// version. Nothing else is written: no Machine, infrastructure machine or bootstrap config.
func TestExecuteWritesTheOwnerAndRotatesTemplates(t *testing.T) {
	c, writes := world(t, nil, nil)
	p := &Planner{Client: c}
	change := inplace.Change{Version: "v1.34.1", BootstrapConfigSpec: []byte(`{"files":[{"path":"/etc/motd","content":"hi"}]}`)}
	res, err := p.Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Owner.Templates) != 1 {
		t.Fatalf("rotated templates %d, want 1 (the bootstrap one)", len(res.Owner.Templates))
	}
	rotated := res.Owner.Templates[0].GetName()
	if !strings.HasPrefix(rotated, "md-0-gip-") {
		t.Errorf("rotated template name %q", rotated)
	}
	exec, err := p.Execute(t.Context(), res, ExecuteRequest{VerifyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(*writes, "; "), "create KubeadmConfigTemplate "+rotated+"; patch MachineDeployment md-0"; got != want {
		t.Errorf("writes: %s\nwant:   %s", got, want)
	}
	if !exec.OwnerChanged || len(exec.Templates) != 1 {
		t.Errorf("execution %+v", exec)
	}
	md := obj(machineDeploymentGVK, "md-0", map[string]any{})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "version"); v != "v1.34.1" {
		t.Errorf("template version %q", v)
	}
	if n, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "bootstrap", "configRef", "name"); n != rotated {
		t.Errorf("bootstrap configRef %q, want %q", n, rotated)
	}
	if n, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "infrastructureRef", "name"); n != "md-0" {
		t.Errorf("infrastructureRef %q changed without an infrastructure patch", n)
	}
	if md.GetAnnotations()[AnnotationRevision] != res.Revision {
		t.Errorf("owner annotations %v", md.GetAnnotations())
	}
	old := obj(kctGVK, "md-0", map[string]any{})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	if files, _, _ := unstructured.NestedSlice(old.Object, "spec", "template", "spec", "files"); len(files) != 0 {
		t.Errorf("the old template was edited: files %v", files)
	}

	// A second plan of the same change finds the owner as desired: no new template, no write.
	*writes = nil
	res, err = p.Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone})
	if err != nil {
		t.Fatal(err)
	}
	if changes, err := res.Owner.Changes(); err != nil || changes {
		t.Errorf("owner still changes after apply (%v): templates %d", err, len(res.Owner.Templates))
	}
	if _, err := p.Execute(t.Context(), res, ExecuteRequest{VerifyTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if len(*writes) != 0 {
		t.Errorf("a repeated apply wrote %v", *writes)
	}
}

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

// A run whose Lease may be another apply's by now (records.Fenced) writes nothing: no rotated
// template, no owner.
func TestExecuteWritesNothingPastItsFence(t *testing.T) {
	c, writes := world(t, nil, nil)
	p := &Planner{Client: c}
	change := inplace.Change{Version: "v1.34.1", BootstrapConfigSpec: []byte(`{"files":[{"path":"/etc/motd","content":"hi"}]}`)}
	res, err := p.Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone})
	if err != nil {
		t.Fatal(err)
	}
	fenced := records.WithFence(t.Context(), func() error { return records.ErrLeaseLost })
	if _, err := p.Execute(fenced, res, ExecuteRequest{VerifyTimeout: 5 * time.Second}); !errors.Is(err, records.ErrLeaseLost) {
		t.Fatalf("Execute past the fence: %v, want ErrLeaseLost", err)
	}
	if len(*writes) != 0 {
		t.Errorf("writes past the fence: %v", *writes)
	}
}
