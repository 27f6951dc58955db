package owners

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
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
