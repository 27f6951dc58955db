package owners

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// hookServer is a fake extension serving one handler, named after it in lower case, for each of
// hooks. Its CanUpdateMachine covers a Machine's spec.version; every other hook answers Success
// with nothing; calls counts the calls per hook.
type hookServer struct {
	mu    sync.Mutex
	calls map[string]int
}

func startHookServer(t *testing.T, name string, hooks ...string) (*hookServer, extension.Endpoint) {
	t.Helper()
	s := &hookServer{calls: map[string]int{}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hook := "Discovery"
		for _, h := range hooks {
			if strings.HasSuffix(r.URL.Path, "/"+strings.ToLower(h)+"/"+strings.ToLower(h)) {
				hook = h
			}
		}
		s.mu.Lock()
		s.calls[hook]++
		s.mu.Unlock()
		ok := hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}
		var resp any
		switch hook {
		case "Discovery":
			d := &hooksv1.DiscoveryResponse{CommonResponse: ok}
			for _, h := range hooks {
				d.Handlers = append(d.Handlers, hooksv1.ExtensionHandler{Name: strings.ToLower(h),
					RequestHook: hooksv1.GroupVersionHook{APIVersion: "hooks.runtime.cluster.x-k8s.io/v1alpha1", Hook: h}})
			}
			resp = d
		case extension.HookCanUpdateMachine:
			var req hooksv1.CanUpdateMachineRequest
			if err := json.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/version", "value": req.Desired.Machine.Spec.Version}})
			resp = &hooksv1.CanUpdateMachineResponse{CommonResponse: ok, MachinePatch: hooksv1.Patch{PatchType: hooksv1.JSONPatchType, Patch: patch}}
		default:
			resp = map[string]any{"status": "Success"}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return s, extension.Endpoint{Name: name, URL: srv.URL, CABundle: ca}
}

func (s *hookServer) count(hook string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[hook]
}

// Cluster API calls one extension per in-place hook and stops the rollout when it finds several
// (see oneHandlerPerHook): the preview shows such machines blocked whatever the fallback, names
// the handlers as Cluster API's error does, and asks no extension whether it can update them.
func TestPlanFollowsOneExtensionPerHook(t *testing.T) {
	change := inplace.Change{Version: "v1.34.1"}
	for _, fallback := range []inplace.Fallback{inplace.FallbackNone, inplace.FallbackRolling} {
		t.Run("two UpdateMachine handlers, fallback "+string(fallback), func(t *testing.T) {
			c, ref, eps := gateWorld(t)
			second, ep := startHookServer(t, "second", extension.HookCanUpdateMachine, extension.HookUpdateMachine)
			res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: fallback, Endpoints: append(eps, ep)})
			if err != nil {
				t.Fatal(err)
			}
			mp := res.Plan.Machines[0]
			want := `found multiple UpdateMachine hooks (update-machine.ref,updatemachine.second): only one hook is supported`
			if mp.Strategy != inplace.StrategyBlocked || !strings.Contains(mp.Stuck, want) || len(mp.Extensions) != 0 {
				t.Errorf("machine plan %+v; want blocked, stuck on %q", mp, want)
			}
			err = res.Plan.Err()
			if err == nil || !strings.Contains(err.Error(), "machine md-0-a: Cluster API calls one extension per in-place hook") ||
				!strings.Contains(err.Error(), "no fallback helps") || strings.Contains(err.Error(), "set fallback") {
				t.Errorf("plan error %v", err)
			}
			if ref.Calls()["CanUpdateMachine"] != 0 || second.count(extension.HookCanUpdateMachine) != 0 {
				t.Errorf("an extension was asked: %v, %v", ref.Calls(), second.calls)
			}
		})
	}
	t.Run("two CanUpdateMachineSet handlers", func(t *testing.T) {
		c, _, _ := gateWorld(t)
		_, a := startHookServer(t, "a", extension.HookCanUpdateMachineSet, extension.HookCanUpdateMachine, extension.HookUpdateMachine)
		_, b := startHookServer(t, "b", extension.HookCanUpdateMachineSet)
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackRolling, Endpoints: []extension.Endpoint{a, b}})
		if err != nil {
			t.Fatal(err)
		}
		want := `found multiple CanUpdateMachineSet hooks (canupdatemachineset.a,canupdatemachineset.b)`
		if mp := res.Plan.Machines[0]; mp.Strategy != inplace.StrategyBlocked || !strings.Contains(mp.Stuck, want) {
			t.Errorf("machine plan %+v; want blocked on %q", mp, want)
		}
	})
	t.Run("surging over every replica, Cluster API replaces without asking", func(t *testing.T) {
		c, _, eps := gateWorld(t)
		md := &unstructured.Unstructured{}
		md.SetGroupVersionKind(machineDeploymentGVK)
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: "md-0"}, md); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(md.Object, int64(1), "spec", "rollout", "strategy", "rollingUpdate", "maxSurge"); err != nil {
			t.Fatal(err)
		}
		if err := c.Update(t.Context(), md); err != nil {
			t.Fatal(err)
		}
		_, ep := startHookServer(t, "second", extension.HookUpdateMachine)
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackRolling, Endpoints: append(eps, ep)})
		if err != nil {
			t.Fatal(err)
		}
		if mp := res.Plan.Machines[0]; mp.Strategy != inplace.StrategyRolling || mp.Stuck != "" {
			t.Errorf("machine plan %+v; want rolling", mp)
		}
	})
	t.Run("a CanUpdateMachine handler for every machine is not Cluster API's concern on a MachineDeployment", func(t *testing.T) {
		c, _, eps := gateWorld(t)
		_, ep := startHookServer(t, "second", extension.HookCanUpdateMachine)
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone, Endpoints: append(eps, ep)})
		if err != nil {
			t.Fatal(err)
		}
		if mp := res.Plan.Machines[0]; mp.Strategy != inplace.StrategyInPlace {
			t.Errorf("machine plan %+v; want in place", mp)
		}
	})
	t.Run("no UpdateMachine handler", func(t *testing.T) {
		c, _, _ := gateWorld(t)
		_, ep := startHookServer(t, "can-only", extension.HookCanUpdateMachine)
		res, err := (&Planner{Client: c}).Plan(t.Context(), Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackRolling, Endpoints: []extension.Endpoint{ep}})
		if err != nil {
			t.Fatal(err)
		}
		if mp := res.Plan.Machines[0]; mp.Strategy != inplace.StrategyBlocked || !strings.Contains(mp.Stuck, "no extensions registered for UpdateMachine hook") {
			t.Errorf("machine plan %+v; want blocked, no UpdateMachine handler", mp)
		}
	})
}

// On a KubeadmControlPlane, Cluster API asks CanUpdateMachine (never CanUpdateMachineSet), so
// that is the hook that must have one handler.
func TestOneHandlerPerHookByOwner(t *testing.T) {
	one := []extension.Handler{{Name: "h"}}
	exts := []*Extension{{Name: "a", CanUpdate: one, CanUpdateSet: one, Update: one}, {Name: "b", CanUpdate: one, CanUpdateSet: one}}
	kcp := &Owner{Kind: KindKubeadmControlPlane}
	if why := oneHandlerPerHook(kcp, exts); !strings.Contains(why, `"found multiple CanUpdateMachine hooks (h.a,h.b): only one hook is supported"`) {
		t.Errorf("KubeadmControlPlane: %q", why)
	}
	md := &Owner{Kind: KindMachineDeployment}
	if why := oneHandlerPerHook(md, exts); !strings.Contains(why, `"found multiple CanUpdateMachineSet hooks (h.a,h.b)`) {
		t.Errorf("MachineDeployment: %q", why)
	}
	exts[1].CanUpdateSet = nil
	if why := oneHandlerPerHook(md, exts); why != "" {
		t.Errorf("MachineDeployment, one handler per hook it calls: %q", why)
	}
	if why := oneHandlerPerHook(md, nil); why != "" {
		t.Errorf("no extension: %q", why)
	}
}

// serviceWorld is a fake management cluster with an ExtensionConfig "svc-ext" that names
// Service capi/ext port 9443, and the given objects.
func serviceWorld(t *testing.T, objs ...*unstructured.Unstructured) client.Client {
	t.Helper()
	gvks := []schema.GroupVersionKind{
		{Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "Namespace"},
		{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
		{Group: "runtime.cluster.x-k8s.io", Version: "v1beta2", Kind: "ExtensionConfig"},
	}
	var gvs []schema.GroupVersion
	for _, gvk := range gvks {
		gvs = append(gvs, gvk.GroupVersion())
	}
	mapper := meta.NewDefaultRESTMapper(gvs)
	for _, gvk := range gvks {
		scope := meta.RESTScopeNamespace
		if gvk.Kind == "Namespace" || gvk.Kind == "ExtensionConfig" {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
	}
	ec := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"clientConfig": map[string]any{
		"service":  map[string]any{"namespace": "capi", "name": "ext", "port": int64(9443)},
		"caBundle": "Y2E=",
	}}}}
	ec.SetGroupVersionKind(gvks[3])
	ec.SetName("svc-ext")
	var cobjs []client.Object
	for _, o := range append(objs, ec) {
		cobjs = append(cobjs, o)
	}
	return fake.NewClientBuilder().WithRESTMapper(mapper).WithScheme(runtime.NewScheme()).WithObjects(cobjs...).Build()
}

func service(ports ...map[string]any) *unstructured.Unstructured {
	var ps []any
	for _, p := range ports {
		ps = append(ps, p)
	}
	s := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ports": ps}}}
	s.SetAPIVersion("v1")
	s.SetKind("Service")
	s.SetNamespace("capi")
	s.SetName("ext")
	return s
}

func endpointSlice(port string, ready ...any) *unstructured.Unstructured {
	var eps []any
	for i, r := range ready {
		e := map[string]any{"addresses": []any{fmt.Sprintf("10.0.0.%d", i+1)}}
		if r != nil {
			e["conditions"] = map[string]any{"ready": r}
		}
		eps = append(eps, e)
	}
	s := &unstructured.Unstructured{Object: map[string]any{
		"addressType": "IPv4", "endpoints": eps,
		"ports": []any{map[string]any{"name": port, "port": int64(9443), "protocol": "TCP"}},
	}}
	s.SetAPIVersion("discovery.k8s.io/v1")
	s.SetKind("EndpointSlice")
	s.SetNamespace("capi")
	s.SetName("ext-" + port + fmt.Sprint(len(ready)))
	s.SetLabels(map[string]string{"kubernetes.io/service-name": "ext"})
	return s
}

// An ExtensionConfig that names a Service becomes an endpoint called through the management API
// server's proxy; before its first call the Service must exist, have the port and a ready
// endpoint for it, else the plan fails naming the ExtensionConfig and the Service.
func TestExtensionConfigServiceThroughTheProxy(t *testing.T) {
	mgmt := &rest.Config{Host: "https://10.0.0.1:6443"}
	c := serviceWorld(t)
	eps, notes, err := fromExtensionConfigs(t.Context(), c, mgmt, "fleet")
	if err != nil || len(notes) != 0 || len(eps) != 1 {
		t.Fatalf("endpoints %+v, notes %q, %v", eps, notes, err)
	}
	if ep := eps[0]; ep.Service == nil || *ep.Service != (extension.Service{Namespace: "capi", Name: "ext", Port: 9443}) || ep.Proxy != mgmt || ep.URL != "" {
		t.Errorf("endpoint %+v", ep)
	}
	if eps, notes, _ := fromExtensionConfigs(t.Context(), c, nil, "fleet"); len(eps) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "svc-ext ignored") {
		t.Errorf("without a management connection: endpoints %+v, notes %q", eps, notes)
	}

	named := map[string]any{"name": "https", "port": int64(9443)}
	for _, tc := range []struct {
		name string
		objs []*unstructured.Unstructured
		want string // "" means ready
	}{
		{"no Service", nil, "which does not exist"},
		{"another port", []*unstructured.Unstructured{service(map[string]any{"port": int64(443)})}, "which has no such port (it has 443)"},
		{"no EndpointSlice", []*unstructured.Unstructured{service(named)}, "which has no ready endpoint"},
		{"not ready", []*unstructured.Unstructured{service(named), endpointSlice("https", false, false)}, "which has no ready endpoint"},
		{"ready for another port", []*unstructured.Unstructured{service(named), endpointSlice("metrics", true)}, "which has no ready endpoint"},
		{"ready", []*unstructured.Unstructured{service(named), endpointSlice("https", false, true)}, ""},
		{"ready condition unset", []*unstructured.Unstructured{service(named), endpointSlice("https", nil)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Planner{Client: serviceWorld(t, tc.objs...), RESTConfig: mgmt}
			err := p.serviceReady(t.Context(), eps[0])
			if tc.want == "" {
				if err != nil {
					t.Errorf("ready: %v", err)
				}
				return
			}
			e, ok := usererr.As(err)
			if !ok || e.Summary != "Update Extension Not Reachable" || !strings.Contains(e.Detail, "ExtensionConfig svc-ext names Service capi/ext port 9443, "+tc.want) ||
				!strings.Contains(e.Detail, "Nothing was written") {
				t.Errorf("error %v; want %q", err, tc.want)
			}
		})
	}
	// An endpoint with a URL is not judged.
	if err := (&Planner{Client: serviceWorld(t)}).serviceReady(t.Context(), extension.Endpoint{Name: "u", URL: "https://10.0.0.2"}); err != nil {
		t.Errorf("URL endpoint: %v", err)
	}
}
