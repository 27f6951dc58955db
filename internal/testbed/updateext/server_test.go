package updateext

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/runtime"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
)

type fakeNodes struct {
	mu  sync.Mutex
	set map[string]string
}

func (f *fakeNodes) SetKubeletVersion(_ context.Context, ns, machine, version string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set[ns+"/"+machine] = version
	return nil
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func start(t *testing.T, cfg Config) (*Server, *extension.Client) {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c, err := extension.New(extension.Endpoint{Name: "ref", URL: s.URL(), CABundle: s.CABundle()}, extension.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func raw(t *testing.T, v any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func TestDiscovery(t *testing.T) {
	_, c := start(t, Config{})
	resp, err := c.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	can := extension.HandlersFor(resp, extension.HookCanUpdateMachine)
	upd := extension.HandlersFor(resp, extension.HookUpdateMachine)
	if len(can) != 1 || can[0].Name != CanUpdateMachineHandler || len(upd) != 1 || upd[0].Name != UpdateMachineHandler {
		t.Errorf("handlers: can %+v update %+v", can, upd)
	}
}

func TestCanUpdateMachineCoversVersionAndBootstrapFiles(t *testing.T) {
	_, c := start(t, Config{})
	req := &hooksv1.CanUpdateMachineRequest{}
	req.Current.Machine.Name, req.Desired.Machine.Name = "m-0", "m-0"
	req.Current.Machine.Spec.Version, req.Desired.Machine.Spec.Version = "v1.36.3", "v1.37.0"
	curBoot := map[string]any{"spec": map[string]any{"files": []any{map[string]any{"path": "/a", "content": "1"}}, "preKubeadmCommands": []any{"x"}}}
	desBoot := map[string]any{"spec": map[string]any{"files": []any{map[string]any{"path": "/a", "content": "2"}}, "ntp": map[string]any{"servers": []any{"ntp.example"}}, "preKubeadmCommands": []any{"y"}}}
	req.Current.BootstrapConfig, req.Desired.BootstrapConfig = raw(t, curBoot), raw(t, desBoot)
	req.Current.InfrastructureMachine = raw(t, map[string]any{"spec": map[string]any{"size": "s"}})
	req.Desired.InfrastructureMachine = raw(t, map[string]any{"spec": map[string]any{"size": "l"}})

	resp, err := c.CanUpdateMachine(t.Context(), CanUpdateMachineHandler, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.InfrastructureMachinePatch.IsDefined() {
		t.Errorf("infrastructure change covered: %s", resp.InfrastructureMachinePatch.Patch)
	}
	// The Machine patch gives spec.version its desired value.
	m := apply(t, req.Current.Machine, resp.MachinePatch)
	if got := m["spec"].(map[string]any)["version"]; got != "v1.37.0" {
		t.Errorf("patched machine version %v", got)
	}
	// The bootstrap patch covers files and ntp, not preKubeadmCommands.
	b := apply(t, curBoot, resp.BootstrapConfigPatch)["spec"].(map[string]any)
	if files, _ := json.Marshal(b["files"]); string(files) != `[{"content":"2","path":"/a"}]` {
		t.Errorf("files %s", files)
	}
	if ntp, _ := json.Marshal(b["ntp"]); string(ntp) != `{"servers":["ntp.example"]}` {
		t.Errorf("ntp %s", ntp)
	}
	if pre, _ := json.Marshal(b["preKubeadmCommands"]); string(pre) != `["x"]` {
		t.Errorf("preKubeadmCommands changed: %s", pre)
	}
}

func TestCanUpdateMachineNothingToCover(t *testing.T) {
	_, c := start(t, Config{})
	req := &hooksv1.CanUpdateMachineRequest{}
	req.Current.Machine.Spec.Version, req.Desired.Machine.Spec.Version = "v1.36.3", "v1.36.3"
	resp, err := c.CanUpdateMachine(t.Context(), CanUpdateMachineHandler, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.MachinePatch.IsDefined() || resp.BootstrapConfigPatch.IsDefined() {
		t.Errorf("patches for no change: %+v", resp)
	}
}

func apply(t *testing.T, obj any, p hooksv1.Patch) map[string]any {
	t.Helper()
	doc, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if p.PatchType != hooksv1.JSONPatchType {
		t.Fatalf("patch type %q", p.PatchType)
	}
	patch, err := jsonpatch.DecodePatch(p.Patch)
	if err != nil {
		t.Fatalf("decode patch %s: %v", p.Patch, err)
	}
	out, err := patch.Apply(doc)
	if err != nil {
		t.Fatalf("apply patch %s: %v", p.Patch, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUpdateMachineProgressDoneAndFailure(t *testing.T) {
	clk := &clock{now: time.Unix(1_000_000, 0)}
	nodes := &fakeNodes{set: map[string]string{}}
	s, c := start(t, Config{Delay: 10 * time.Second, RetryAfterSeconds: 2, Nodes: nodes, Now: clk.Now})
	req := func(name string) *hooksv1.UpdateMachineRequest {
		r := &hooksv1.UpdateMachineRequest{}
		r.Desired.Machine.Namespace, r.Desired.Machine.Name = "fleet", name
		r.Desired.Machine.Spec.Version = "v1.37.0"
		return r
	}
	resp, err := c.UpdateMachine(t.Context(), UpdateMachineHandler, req("m-0"))
	if err != nil || resp.RetryAfterSeconds != 2 {
		t.Fatalf("first call: %+v, %v; want in progress", resp, err)
	}
	if len(nodes.set) != 0 {
		t.Fatal("node changed before the delay passed")
	}
	clk.Advance(10 * time.Second)
	resp, err = c.UpdateMachine(t.Context(), UpdateMachineHandler, req("m-0"))
	if err != nil || resp.RetryAfterSeconds != 0 {
		t.Fatalf("after the delay: %+v, %v; want done", resp, err)
	}
	if nodes.set["fleet/m-0"] != "v1.37.0" {
		t.Errorf("node versions %v", nodes.set)
	}
	// Idempotent: asking again reports done without redoing anything.
	if resp, err = c.UpdateMachine(t.Context(), UpdateMachineHandler, req("m-0")); err != nil || resp.RetryAfterSeconds != 0 {
		t.Fatalf("repeat: %+v, %v", resp, err)
	}
	if got := s.Finished(); len(got) != 1 || got[0] != "fleet/m-0" {
		t.Errorf("Finished = %v", got)
	}

	s.FailMachine("fleet", "m-1", "firmware refused")
	_, err = c.UpdateMachine(t.Context(), UpdateMachineHandler, req("m-1"))
	if extension.KindOf(err) != extension.KindFailure {
		t.Fatalf("failing machine: %v", err)
	}
	if calls := s.Calls(); calls["UpdateMachine"] != 4 {
		t.Errorf("calls %v", calls)
	}
}
