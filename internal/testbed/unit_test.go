package testbed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestToolchainFromEnv(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GRADUAL_CACHE", dir)
	for _, v := range (&Toolchain{}).vars() {
		t.Setenv(v.name, "")
	}

	_, err := ToolchainFromEnv()
	if err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), "GRADUAL_") {
		t.Fatalf("no toolchain: got %v, want an error naming the variable and `make tools`", err)
	}

	// The env file supplies what the environment lacks; the environment wins.
	env := "export GRADUAL_KUBE_APISERVER=" + bin + "\nexport GRADUAL_KUBE_CONTROLLER_MANAGER=" + bin +
		"\nexport GRADUAL_KUBE_SCHEDULER=" + bin + "\nexport GRADUAL_ETCD=" + bin + "\nexport GRADUAL_KWOK=" + bin +
		"\nexport GRADUAL_KWOKCTL=/nonexistent\nexport GRADUAL_TOFU=/opt/tofu\n"
	if err := os.WriteFile(filepath.Join(dir, "toolchain.env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ToolchainFromEnv(); err == nil || !strings.Contains(err.Error(), "GRADUAL_KWOKCTL=/nonexistent") {
		t.Fatalf("missing binary: got %v", err)
	}
	t.Setenv("GRADUAL_KWOKCTL", bin)
	tc, err := ToolchainFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if tc.Kwokctl != bin || tc.KubeAPIServer != bin || tc.Tofu != "/opt/tofu" {
		t.Errorf("toolchain %+v", tc)
	}
}

func TestClusterStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, ready := range []bool{true, false} {
		st := clusterStatus(WorkloadSpec{Name: "a", Ready: ready}, 3, now)
		if ptr.Deref(st.Initialization.ControlPlaneInitialized, !ready) != ready || ptr.Deref(st.Initialization.InfrastructureProvisioned, !ready) != ready {
			t.Errorf("ready=%v: initialization %+v", ready, st.Initialization)
		}
		wantPhase := clusterv1.ClusterPhaseProvisioning
		if ready {
			wantPhase = clusterv1.ClusterPhaseProvisioned
		}
		if st.Phase != string(wantPhase) {
			t.Errorf("ready=%v: phase %s", ready, st.Phase)
		}
		for _, c := range st.Conditions {
			if c.Reason == "" || c.Message == "" || c.LastTransitionTime != now || c.ObservedGeneration != 3 {
				t.Errorf("ready=%v: incomplete condition %+v", ready, c)
			}
			if c.Type != clusterv1.PausedCondition && (c.Status == metav1.ConditionTrue) != ready {
				t.Errorf("ready=%v: condition %s is %s", ready, c.Type, c.Status)
			}
		}
	}
}

func TestClusterObject(t *testing.T) {
	w := &Workload{
		Cluster: Cluster{Name: "a", Server: "https://127.0.0.1:40123"},
		Spec:    WorkloadSpec{Name: "a", Labels: map[string]string{"env": "prod"}, Paused: true, KubernetesVersion: "v1.36.3"},
	}
	c := clusterObject("fleet", w)
	if c.Spec.ControlPlaneEndpoint.Port != 40123 || c.Spec.InfrastructureRef.APIGroup != InfrastructureGroup ||
		!ptr.Deref(c.Spec.Paused, false) || c.Spec.Topology.Version != "v1.36.3" || c.Labels["env"] != "prod" {
		t.Errorf("cluster object %+v", c)
	}
	w.Spec.Labels["env"] = "changed"
	if c.Labels["env"] != "prod" {
		t.Error("cluster object shares the spec's label map")
	}
}

func TestRunLimited(t *testing.T) {
	var running, peak atomic.Int32
	var tasks []func(context.Context) error
	for range 6 {
		tasks = append(tasks, func(context.Context) error {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
			return nil
		})
	}
	if err := runLimited(t.Context(), 2, tasks); err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 2 {
		t.Errorf("peak concurrency %d, want 2", peak.Load())
	}

	boom := errors.New("boom")
	var started atomic.Int32
	tasks = tasks[:0]
	for i := range 5 {
		tasks = append(tasks, func(ctx context.Context) error {
			started.Add(1)
			if i == 0 {
				return boom
			}
			<-ctx.Done()
			return nil
		})
	}
	if err := runLimited(t.Context(), 2, tasks); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if started.Load() > 3 {
		t.Errorf("%d tasks started after the first failed", started.Load())
	}
}

func TestWorkloadSpecValidate(t *testing.T) {
	for _, s := range []WorkloadSpec{{Name: "Bad_Name"}, {Name: "x", NoKubeconfig: true, ExecKubeconfig: true}, {Name: "x", Nodes: -1}} {
		if err := s.validate(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	s := WorkloadSpec{Name: "ok"}
	if err := s.validate(); err != nil || s.Nodes != defaultNodes {
		t.Errorf("defaults: %v %+v", err, s)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Errorf("ports %v", ports)
		}
		seen[p] = true
	}
}
