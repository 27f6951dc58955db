package owners

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
)

// The feature-gates flag is read as Kubernetes' feature gates parse it: key=bool pairs, later
// ones winning, in `--feature-gates=…` or `--feature-gates …` form, in command or args.
func TestGateFromArgs(t *testing.T) {
	for _, tc := range []struct {
		argv       []string
		value, set bool
		err        bool
	}{
		{argv: []string{"/manager", "--leader-elect"}},
		{argv: []string{"--feature-gates=MachinePool=true,ClusterTopology=false"}},
		{argv: []string{"--feature-gates=MachinePool=true,InPlaceUpdates=true,RuntimeSDK=true"}, value: true, set: true},
		{argv: []string{"--feature-gates=InPlaceUpdates=false"}, set: true},
		{argv: []string{"--feature-gates", "RuntimeSDK=true, InPlaceUpdates=True"}, value: true, set: true},
		{argv: []string{"--feature-gates=InPlaceUpdates=true", "--feature-gates=InPlaceUpdates=false"}, set: true},
		{argv: []string{"--feature-gates=InPlaceUpdates=true,InPlaceUpdates=0"}, set: true},
		{argv: []string{"--feature-gates=InPlaceUpdatesX=true"}},
		{argv: []string{"--feature-gates=InPlaceUpdates=${EXP_IN_PLACE_UPDATES:=false}"}, err: true},
	} {
		value, set, err := gateFromArgs(tc.argv)
		if value != tc.value || set != tc.set || (err != nil) != tc.err {
			t.Errorf("%q: value %v set %v err %v; want %v %v err %v", tc.argv, value, set, err, tc.value, tc.set, tc.err)
		}
	}
}

// manager is a Cluster API manager's Deployment as clusterctl installs it (names and labels of
// v1.14.2's core/config/default), with the given image and arguments.
func manager(namespace, name, provider, image string, args ...string) *unstructured.Unstructured {
	d := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "manager", "image": image, "command": []any{"/manager"}, "args": toAny(args)},
		}}}},
	}}
	d.SetGroupVersionKind(deploymentGVK)
	d.SetNamespace(namespace)
	d.SetName(name)
	d.SetLabels(map[string]string{providerLabel: provider, "clusterctl.cluster.x-k8s.io": ""})
	return d
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

const (
	coreImage = "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2"
	kcpImage  = "registry.k8s.io/cluster-api/kubeadm-control-plane-controller:v1.14.2"
	// gatesOff and gatesOn are v1.14.2's core --feature-gates with EXP_IN_PLACE_UPDATES false and true.
	gatesOff = "--feature-gates=MachinePool=true,ClusterTopology=false,RuntimeSDK=false,MachineSetPreflightChecks=true,PriorityQueue=true,InPlaceUpdates=false,MachineTaintPropagation=false"
	gatesOn  = "--feature-gates=MachinePool=true,ClusterTopology=false,RuntimeSDK=true,MachineSetPreflightChecks=true,PriorityQueue=true,InPlaceUpdates=true,MachineTaintPropagation=false"
)

func TestGateOf(t *testing.T) {
	core := func(image string, args ...string) *unstructured.Unstructured {
		return manager("capi-system", "capi-controller-manager", providerCore, image, args...)
	}
	for _, tc := range []struct {
		name string
		deps []*unstructured.Unstructured
		want GateState
		why  string
	}{
		{"none", nil, GateUnknown, "no Deployment labelled cluster.x-k8s.io/provider=cluster-api"},
		{"on", []*unstructured.Unstructured{core(coreImage, "--leader-elect", gatesOn)}, GateOn, "Deployment capi-system/capi-controller-manager runs the manager with InPlaceUpdates=true"},
		{"off", []*unstructured.Unstructured{core(coreImage, gatesOff)}, GateOff, "InPlaceUpdates=false"},
		{"unset, v1.14 default", []*unstructured.Unstructured{core(coreImage, "--feature-gates=MachinePool=true")}, GateOff, "off by default in Cluster API v1.14"},
		{"unset, before v1.12", []*unstructured.Unstructured{core("registry.k8s.io/cluster-api/cluster-api-controller:v1.11.3")}, GateOff, "no in-place updates"},
		{"unset, later version", []*unstructured.Unstructured{core("registry.k8s.io/cluster-api/cluster-api-controller:v1.15.0")}, GateUnknown, "not known here"},
		{"unset, untagged image", []*unstructured.Unstructured{core("my.registry:5000/capi@sha256:abcd")}, GateUnknown, "names no Cluster API version"},
		{"unsubstituted variable", []*unstructured.Unstructured{core(coreImage, "--feature-gates=InPlaceUpdates=${EXP_IN_PLACE_UPDATES:=false}")}, GateUnknown, "not a boolean"},
		{"two agreeing", []*unstructured.Unstructured{core(coreImage, gatesOff), manager("tenant", "capi-controller-manager", providerCore, coreImage, gatesOff)}, GateOff, "capi-system/capi-controller-manager"},
		{"two disagreeing", []*unstructured.Unstructured{core(coreImage, gatesOff), manager("tenant", "capi-controller-manager", providerCore, coreImage, gatesOn)}, GateUnknown, "disagree"},
	} {
		got := gateOf(providerCore, tc.deps)
		if got.State != tc.want || !strings.Contains(got.Why, tc.why) {
			t.Errorf("%s: %s (%s); want %s, why containing %q", tc.name, got.State, got.Why, tc.want, tc.why)
		}
	}
}

// A control plane is updated in place by KCP's manager deciding and the core Machine controller
// calling UpdateMachine; a MachineDeployment by the core manager alone.
func TestGatesForOwner(t *testing.T) {
	on, off, unknown := Gate{GateOn, "on"}, Gate{GateOff, "off"}, Gate{GateUnknown, "unknown"}
	for _, tc := range []struct {
		core, kcp Gate
		kind      string
		want      GateState
		note      bool
	}{
		{on, off, KindMachineDeployment, GateOn, false},
		{off, on, KindMachineDeployment, GateOff, false},
		{on, off, KindKubeadmControlPlane, GateOff, false},
		{on, on, KindKubeadmControlPlane, GateOn, false},
		{off, on, KindKubeadmControlPlane, GateOn, true},
		{unknown, on, KindKubeadmControlPlane, GateUnknown, false},
		{on, unknown, KindKubeadmControlPlane, GateUnknown, false},
		{off, off, KindKubeadmControlPlane, GateOff, false},
	} {
		g, note := Gates{Core: tc.core, KCP: tc.kcp}.forOwner(tc.kind)
		if g.State != tc.want || (note != "") != tc.note {
			t.Errorf("core %s, kcp %s, %s: %s, note %q; want %s, note %v", tc.core.State, tc.kcp.State, tc.kind, g.State, note, tc.want, tc.note)
		}
	}
}

// ReadGates lists the managers' Deployments by their provider label; a refused list makes both
// gates unknown, with the reason, and is no error.
func TestReadGates(t *testing.T) {
	c, _ := world(t, nil, nil)
	for _, d := range []*unstructured.Unstructured{
		manager("capi-system", "capi-controller-manager", providerCore, coreImage, gatesOff),
		manager("capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-controller-manager", providerKCP, kcpImage, "--feature-gates=InPlaceUpdates=true"),
		manager("capi-kubeadm-bootstrap-system", "capi-kubeadm-bootstrap-controller-manager", "bootstrap-kubeadm", coreImage, gatesOn),
	} {
		if err := c.Create(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	g := ReadGates(t.Context(), c)
	if g.Core.State != GateOff || g.KCP.State != GateOn {
		t.Errorf("gates %+v; want core off, KCP on", g)
	}
	forbidden := fake.NewClientBuilder().WithRESTMapper(c.RESTMapper()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("RBAC"))
		},
	}).Build()
	g = ReadGates(t.Context(), forbidden)
	if g.Core.State != GateUnknown || !strings.Contains(g.Core.Why, "forbidden") || g.KCP.State != GateUnknown {
		t.Errorf("gates %+v; want both unknown, forbidden", g)
	}
}

// gateWorld is world's MachineDeployment md-0 with one replica (maxSurge 0, so a covered change
// is done in place) and its Machine md-0-a on v1.34.0 with its DevMachine and KubeadmConfig, the
// given manager Deployments, and the reference update extension (which covers spec.version).
func gateWorld(t *testing.T, deps ...*unstructured.Unstructured) (client.Client, *updateext.Server, []extension.Endpoint) {
	t.Helper()
	c, _ := world(t, map[string]any{"replicas": int64(1)}, nil)
	m := obj(machineGVK, "md-0-a", map[string]any{
		"spec": map[string]any{
			"clusterName": "c", "version": "v1.34.0",
			"bootstrap":         map[string]any{"configRef": map[string]any{"apiGroup": kcGVK.Group, "kind": kcGVK.Kind, "name": "md-0-a"}},
			"infrastructureRef": map[string]any{"apiGroup": dmGVK.Group, "kind": dmGVK.Kind, "name": "md-0-a"},
		},
		"status": map[string]any{"nodeRef": map[string]any{"name": "md-0-a"}},
	})
	m.SetLabels(map[string]string{clusterNameLabel: "c", deploymentNameLabel: "md-0"})
	objs := []*unstructured.Unstructured{
		m,
		obj(kcGVK, "md-0-a", map[string]any{"spec": map[string]any{"files": []any{}}}),
		obj(dmGVK, "md-0-a", map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}}}}),
	}
	for _, o := range append(objs, deps...) {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	s, err := updateext.Start(updateext.Config{Name: "ref"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return c, s, []extension.Endpoint{{Name: "ref", URL: s.URL(), CABundle: s.CABundle()}}
}

// With the gate evidently off, every changing machine is replaced whatever the extensions cover
// (none is asked), fallback "none" refuses naming the machine and the gate; with it on, the same
// change is in place; when it cannot be told, the preview says so in a note.
func TestPlanFollowsTheFeatureGate(t *testing.T) {
	change := inplace.Change{Version: "v1.34.1"}
	coreOff := func() *unstructured.Unstructured {
		return manager("capi-system", "capi-controller-manager", providerCore, coreImage, gatesOff)
	}
	coreOn := func() *unstructured.Unstructured {
		return manager("capi-system", "capi-controller-manager", providerCore, coreImage, gatesOn)
	}
	notes := func(r *PlanResult) string { return strings.Join(r.Notes, "\n") }

	t.Run("on", func(t *testing.T) {
		c, ext, eps := gateWorld(t, coreOn())
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone, Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		if mp := res.Plan.Machines[0]; mp.Strategy != inplace.StrategyInPlace || len(mp.Extensions) != 1 || mp.Extensions[0] != "ref" {
			t.Errorf("machine plan %+v; want in place by ref", mp)
		}
		if strings.Contains(notes(res), "feature gate") {
			t.Errorf("notes %q", res.Notes)
		}
		if ext.Calls()["CanUpdateMachine"] != 1 {
			t.Errorf("extension calls %v", ext.Calls())
		}
	})
	t.Run("off, fallback rolling", func(t *testing.T) {
		c, ext, eps := gateWorld(t, coreOff())
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackRolling, Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		mp := res.Plan.Machines[0]
		if mp.Strategy != inplace.StrategyRolling || len(mp.Uncovered) != 0 || len(mp.Extensions) != 0 || len(mp.Notes) == 0 || mp.Notes[0] != GateOffNote {
			t.Errorf("machine plan %+v; want rolling, noted %q", mp, GateOffNote)
		}
		if len(mp.Changed) != 1 || mp.Changed[0].String() != "machine spec.version" {
			t.Errorf("changed %v", mp.Changed)
		}
		if n := notes(res); !strings.Contains(n, "feature gate is off (Deployment capi-system/capi-controller-manager runs the manager with InPlaceUpdates=false)") {
			t.Errorf("notes %q", n)
		}
		if len(ext.Calls()) != 0 {
			t.Errorf("the extension was asked with the gate off: %v", ext.Calls())
		}
		if res.Plan.Err() != nil {
			t.Errorf("fallback rolling refused: %v", res.Plan.Err())
		}
	})
	t.Run("off, fallback none", func(t *testing.T) {
		c, _, eps := gateWorld(t, coreOff())
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone, Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		err = res.Plan.Err()
		if err == nil || !strings.Contains(err.Error(), "machine md-0-a: "+GateOffNote) || strings.Contains(err.Error(), "add an extension") {
			t.Errorf("plan error %v; want machine md-0-a refused for the gate", err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		c, _, eps := gateWorld(t)
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone, Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Machines[0].Strategy != inplace.StrategyInPlace {
			t.Errorf("machine plan %+v; want in place (the gate cannot be told, so the extensions decide)", res.Plan.Machines[0])
		}
		if n := notes(res); !strings.Contains(n, "Cannot tell whether Cluster API's InPlaceUpdates feature gate is on (no Deployment labelled cluster.x-k8s.io/provider=cluster-api") {
			t.Errorf("notes %q", n)
		}
	})
	t.Run("nothing changes", func(t *testing.T) {
		c, _, eps := gateWorld(t)
		reads := 0
		counting := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				if l.GetObjectKind().GroupVersionKind() == deploymentListGVK {
					reads++
				}
				return c.List(ctx, l, opts...)
			},
		})
		res, err := (&Planner{Client: counting}).Plan(t.Context(), Request{Selection: mdSelection, Change: inplace.Change{Version: "v1.34.0"}, Fallback: inplace.FallbackNone, Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Machines[0].Strategy != inplace.StrategyUnchanged || len(res.Notes) != 0 || reads != 0 {
			t.Errorf("plan %+v, notes %q, Deployment lists %d; want unchanged, no note, no read", res.Plan.Machines[0], res.Notes, reads)
		}
	})
}
