package inplace

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

func obj(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatalf("fixture %s: %v", s, err)
	}
	return u
}

func current(t *testing.T) Objects {
	return Objects{
		Machine: obj(t, `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine","metadata":{"name":"md-0-a","namespace":"fleet","resourceVersion":"7"},
			"spec":{"clusterName":"prod","version":"v1.36.3","providerID":"gradual://md-0-a",
				"bootstrap":{"configRef":{"apiGroup":"bootstrap.cluster.x-k8s.io","kind":"KubeadmConfig","name":"md-0-a"}},
				"infrastructureRef":{"apiGroup":"infrastructure.gradual.dev","kind":"GradualMachine","name":"md-0-a"}},
			"status":{"phase":"Running","nodeRef":{"name":"kwok-node-0"}}}`),
		InfrastructureMachine: obj(t, `{"apiVersion":"infrastructure.gradual.dev/v1beta1","kind":"GradualMachine","metadata":{"name":"md-0-a","namespace":"fleet"},
			"spec":{"providerID":"gradual://md-0-a","size":"small","replicas":3}}`),
		BootstrapConfig: obj(t, `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","kind":"KubeadmConfig","metadata":{"name":"md-0-a","namespace":"fleet"},
			"spec":{"files":[{"path":"/etc/motd","content":"hello"}],"preKubeadmCommands":["echo hi"]}}`),
	}
}

func jsonPatch(s string) hooksv1.Patch {
	return hooksv1.Patch{PatchType: hooksv1.JSONPatchType, Patch: []byte(s)}
}

func mergePatch(s string) hooksv1.Patch {
	return hooksv1.Patch{PatchType: hooksv1.JSONMergePatchType, Patch: []byte(s)}
}

var (
	coversVersion = Answer{Extension: "kubelet", Machine: jsonPatch(`[{"op":"replace","path":"/spec/version","value":"v1.37.0"}]`)}
	coversFiles   = Answer{Extension: "files", BootstrapConfig: mergePatch(`{"spec":{"files":[{"path":"/etc/motd","content":"bye"}]}}`)}
)

func TestPlanMachine(t *testing.T) {
	version := Change{Version: "v1.37.0"}
	versionAndFiles := Change{Version: "v1.37.0", BootstrapConfigSpec: []byte(`{"files":[{"path":"/etc/motd","content":"bye"}]}`)}
	for _, tc := range []struct {
		name     string
		change   Change
		answers  []Answer
		fallback Fallback

		strategy   Strategy
		changed    []string
		extensions []string
		uncovered  []string
		note       string
	}{
		{
			name: "nothing to change", change: Change{Version: "v1.36.3"}, answers: []Answer{coversVersion},
			strategy: StrategyUnchanged,
		},
		{
			name: "version covered by one extension", change: version, answers: []Answer{coversVersion},
			strategy: StrategyInPlace, changed: []string{"machine spec.version"}, extensions: []string{"kubelet"},
		},
		{
			name: "two extensions together cover what neither covers alone", change: versionAndFiles,
			answers:  []Answer{coversVersion, coversFiles},
			strategy: StrategyInPlace, changed: []string{"machine spec.version", "bootstrapConfig spec.files"},
			extensions: []string{"kubelet", "files"},
		},
		{
			name: "uncovered with fallback none blocks", change: versionAndFiles, answers: []Answer{coversVersion},
			fallback: FallbackNone,
			strategy: StrategyBlocked, changed: []string{"machine spec.version", "bootstrapConfig spec.files"},
			extensions: []string{"kubelet"}, uncovered: []string{"bootstrapConfig spec.files"},
		},
		{
			name: "uncovered with fallback rolling replaces", change: versionAndFiles, answers: []Answer{coversVersion},
			fallback: FallbackRolling,
			strategy: StrategyRolling, extensions: []string{"kubelet"}, uncovered: []string{"bootstrapConfig spec.files"},
		},
		{
			name: "no extension at all", change: version, fallback: FallbackNone,
			strategy: StrategyBlocked, uncovered: []string{"machine spec.version"},
		},
		{
			name: "status changes in a patch neither count nor hurt", change: version,
			answers: []Answer{{Extension: "kubelet", Machine: jsonPatch(`[
				{"op":"replace","path":"/spec/version","value":"v1.37.0"},
				{"op":"replace","path":"/status/phase","value":"Updating"}]`)}},
			strategy: StrategyInPlace, extensions: []string{"kubelet"},
		},
		{
			name: "a status-only patch covers nothing", change: version,
			answers:  []Answer{{Extension: "liar", Machine: jsonPatch(`[{"op":"replace","path":"/status/phase","value":"Updating"}]`)}},
			fallback: FallbackNone,
			strategy: StrategyBlocked, uncovered: []string{"machine spec.version"},
		},
		{
			name: "a wrong value covers nothing", change: version,
			answers:  []Answer{{Extension: "old", Machine: jsonPatch(`[{"op":"replace","path":"/spec/version","value":"v1.36.9"}]`)}},
			fallback: FallbackNone,
			strategy: StrategyBlocked, uncovered: []string{"machine spec.version"},
		},
		{
			name: "a patch changing an unrequested field leaves the machine uncovered", change: version,
			answers: []Answer{{Extension: "meddler", Machine: jsonPatch(`[
				{"op":"replace","path":"/spec/version","value":"v1.37.0"},
				{"op":"replace","path":"/spec/providerID","value":"other://x"}]`)}},
			fallback: FallbackRolling,
			strategy: StrategyRolling, extensions: []string{"meddler"}, uncovered: []string{"machine spec.providerID"},
			note: "which the desired spec does not",
		},
		{
			name: "a failed answer covers nothing and is noted", change: version,
			answers:  []Answer{{Extension: "down", Err: errors.New("no answer within the 10s timeout")}, coversVersion},
			strategy: StrategyInPlace, extensions: []string{"kubelet"}, note: "down did not answer",
		},
		{
			name: "a patch that does not apply is noted", change: version,
			answers:  []Answer{{Extension: "broken", Machine: jsonPatch(`[{"op":"replace","path":"/spec/nothing/here","value":1}]`)}, coversVersion},
			strategy: StrategyInPlace, extensions: []string{"kubelet"}, note: "broken: machine patch does not apply",
		},
		{
			name: "infrastructure fields, numbers and nested keys", fallback: FallbackNone,
			change:  Change{InfrastructureMachineSpec: []byte(`{"size":"large","replicas":3,"labels":{"a/b":"c"}}`)},
			answers: []Answer{{Extension: "infra", InfrastructureMachine: mergePatch(`{"spec":{"size":"large"}}`)}},
			// replicas 3 is no change, whatever the number's Go type; a/b is escaped in the path.
			strategy: StrategyBlocked, changed: []string{"infrastructureMachine spec.labels.a/b", "infrastructureMachine spec.size"},
			extensions: []string{"infra"}, uncovered: []string{"infrastructureMachine spec.labels.a/b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := current(t)
			des, err := Desired(cur, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			fallback := tc.fallback
			if fallback == "" {
				fallback = FallbackNone
			}
			p := PlanMachine(cur, des, tc.answers, fallback)
			if p.Machine != "md-0-a" || p.Node != "kwok-node-0" {
				t.Errorf("machine %q node %q", p.Machine, p.Node)
			}
			if p.Strategy != tc.strategy {
				t.Errorf("strategy %s, want %s (plan %+v)", p.Strategy, tc.strategy, p)
			}
			if tc.changed != nil && !reflect.DeepEqual(names(p.Changed), tc.changed) {
				t.Errorf("changed %v, want %v", names(p.Changed), tc.changed)
			}
			if !reflect.DeepEqual(p.Extensions, tc.extensions) {
				t.Errorf("extensions %v, want %v", p.Extensions, tc.extensions)
			}
			if !reflect.DeepEqual(names(p.Uncovered), tc.uncovered) {
				t.Errorf("uncovered %v, want %v", names(p.Uncovered), tc.uncovered)
			}
			if tc.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", p.Notes, tc.note)
			}
			if tc.note == "" && len(p.Notes) > 0 {
				t.Errorf("unexpected notes %q", p.Notes)
			}
			if cur.Machine.Object["spec"].(map[string]any)["version"] != "v1.36.3" {
				t.Error("planning modified the current objects")
			}
		})
	}
}

func TestCoveragePerExtension(t *testing.T) {
	cur := current(t)
	des, err := Desired(cur, Change{Version: "v1.37.0", BootstrapConfigSpec: []byte(`{"files":[{"path":"/etc/motd","content":"bye"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := PlanMachine(cur, des, []Answer{coversVersion, coversFiles}, FallbackNone)
	want := []Coverage{
		{Extension: "kubelet", Fields: []Field{{KindMachine, "/spec/version"}}},
		{Extension: "files", Fields: []Field{{KindBootstrapConfig, "/spec/files"}}},
	}
	if !reflect.DeepEqual(p.Coverage, want) {
		t.Errorf("coverage %+v, want %+v", p.Coverage, want)
	}
}

func TestPlanErrNamesMachinesAndFields(t *testing.T) {
	cur := current(t)
	des, err := Desired(cur, Change{Version: "v1.37.0", BootstrapConfigSpec: []byte(`{"ntp":{"servers":["pool.ntp.org"]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{Machines: []MachinePlan{PlanMachine(cur, des, []Answer{coversVersion}, FallbackNone)}}
	err = plan.Err()
	if err == nil {
		t.Fatal("no error for a blocked machine")
	}
	for _, s := range []string{"machine md-0-a", "bootstrapConfig spec.ntp.servers", `fallback = "rolling"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if got := plan.Counts(); got[StrategyBlocked] != 1 {
		t.Errorf("counts %v", got)
	}
	rolling := Plan{Machines: []MachinePlan{PlanMachine(cur, des, []Answer{coversVersion}, FallbackRolling)}}
	if rolling.Err() != nil {
		t.Errorf("rolling fallback: %v", rolling.Err())
	}
}

func TestDesired(t *testing.T) {
	cur := current(t)
	des, err := Desired(cur, Change{
		Version:             "v1.37.0",
		MachineSpec:         []byte(`{"providerID":null}`),
		BootstrapConfigSpec: []byte(`{"ntp":{"enabled":true}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	spec := des.Machine.Object["spec"].(map[string]any)
	if spec["version"] != "v1.37.0" || spec["providerID"] != nil || spec["clusterName"] != "prod" {
		t.Errorf("desired machine spec %v", spec)
	}
	if des.Machine.Object["status"] == nil {
		t.Error("status dropped from the desired machine")
	}
	changed, err := ChangedFields(cur, des)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(changed); !reflect.DeepEqual(got, []string{"machine spec.providerID", "machine spec.version", "bootstrapConfig spec.ntp.enabled"}) {
		t.Errorf("changed %v", got)
	}

	noBootstrap := cur
	noBootstrap.BootstrapConfig = nil
	if _, err := Desired(noBootstrap, Change{BootstrapConfigSpec: []byte(`{"a":1}`)}); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Errorf("bootstrap patch without a bootstrap config: %v", err)
	}
	if err := (Change{MachineSpec: []byte(`[1]`)}).Validate(); err == nil {
		t.Error("a non-object merge patch was accepted")
	}
}

func TestRequestsCarrySpecOnly(t *testing.T) {
	cur := current(t)
	des, err := Desired(cur, Change{Version: "v1.37.0"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := CanUpdateMachineRequest(cur, des)
	if err != nil {
		t.Fatal(err)
	}
	if req.Current.Machine.Spec.Version != "v1.36.3" || req.Desired.Machine.Spec.Version != "v1.37.0" || req.Current.Machine.Name != "md-0-a" {
		t.Errorf("machines %+v / %+v", req.Current.Machine.Spec, req.Desired.Machine.Spec)
	}
	if req.Current.Machine.Status.Phase != "" || req.Current.Machine.ResourceVersion != "" {
		t.Errorf("status or resourceVersion sent: %+v", req.Current.Machine.Status)
	}
	var boot map[string]any
	if err := json.Unmarshal(req.Desired.BootstrapConfig.Raw, &boot); err != nil || boot["kind"] != "KubeadmConfig" || boot["spec"] == nil {
		t.Errorf("bootstrap config %s: %v", req.Desired.BootstrapConfig.Raw, err)
	}
	upd, err := UpdateMachineRequest(des)
	if err != nil || upd.Desired.Machine.Spec.Version != "v1.37.0" || len(upd.Desired.InfrastructureMachine.Raw) == 0 {
		t.Errorf("UpdateMachineRequest %+v, %v", upd, err)
	}
	if _, err := ParseFallback("sometimes"); err == nil {
		t.Error("ParseFallback accepted nonsense")
	}
}

func names(fs []Field) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

func TestRotateTemplate(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
		"metadata": map[string]any{"name": "md-0", "namespace": "fleet", "uid": "u1", "resourceVersion": "7", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"files": []any{}}}},
	}}
	if _, changed, err := RotateTemplate(tmpl, []byte(`{"files":[]}`)); err != nil || changed {
		t.Fatalf("a patch that changes nothing rotates (%v)", err)
	}
	r, changed, err := RotateTemplate(tmpl, []byte(`{"files":[{"path":"/x"}]}`))
	if err != nil || !changed {
		t.Fatalf("rotate: %v %v", changed, err)
	}
	if !strings.HasPrefix(r.GetName(), "md-0-gip-") || r.GetUID() != "" || r.GetResourceVersion() != "" || r.GetLabels()["a"] != "b" {
		t.Errorf("rotated metadata %v", r.Object["metadata"])
	}
	// Rotating the rotated one again with the same content keeps its name; another content
	// gets another name on the same base.
	again, changed, _ := RotateTemplate(r, []byte(`{"files":[{"path":"/x"}]}`))
	if changed || again != nil {
		t.Errorf("re-rotating the same content: %v", again)
	}
	other, _, _ := RotateTemplate(r, []byte(`{"files":[{"path":"/y"}]}`))
	if other.GetName() == r.GetName() || !strings.HasPrefix(other.GetName(), "md-0-gip-") || strings.Count(other.GetName(), "gip") != 1 {
		t.Errorf("rotated from %s: %s", r.GetName(), other.GetName())
	}
	if tmpl.GetUID() != "u1" {
		t.Error("the template itself was modified")
	}
}
