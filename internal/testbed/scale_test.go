package testbed

import (
	"strings"
	"testing"
)

func TestScaleWorkloads(t *testing.T) {
	specs, err := ScaleWorkloads(10, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 10 {
		t.Fatalf("%d specs, want 10", len(specs))
	}
	servers := map[string]int{}
	names := map[string]bool{}
	for i, s := range specs {
		if names[s.Name] {
			t.Fatalf("name %q twice", s.Name)
		}
		names[s.Name] = true
		if !s.Ready || s.Labels["env"] != "scale" {
			t.Errorf("%s: ready=%v labels=%v", s.Name, s.Ready, s.Labels)
		}
		if i < 3 {
			if !s.hasControlPlane() {
				t.Errorf("%s: the first three have control planes", s.Name)
			}
			continue
		}
		if s.hasControlPlane() {
			t.Errorf("%s has a control plane of its own", s.Name)
		}
		servers[s.SharesWith]++
	}
	// Round-robin: 7 sharing Clusters over 3 servers.
	if servers["scale-api-1"] != 3 || servers["scale-api-2"] != 2 || servers["scale-api-3"] != 2 {
		t.Errorf("sharing %v, want 3/2/2", servers)
	}
	// One solo server: scale-api-3 serves only itself, the 7 others share the first two.
	specs, err = ScaleWorkloads(10, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	servers = map[string]int{}
	for _, s := range specs[3:] {
		servers[s.SharesWith]++
	}
	if servers["scale-api-1"] != 4 || servers["scale-api-2"] != 3 || servers["scale-api-3"] != 0 {
		t.Errorf("sharing with one solo server %v, want 4/3/0", servers)
	}
	if _, err := ScaleWorkloads(10, 2, 2); err == nil {
		t.Error("every server solo with Clusters left over accepted")
	}
	if err := checkShared(specs); err != nil {
		t.Fatal(err)
	}
	if _, err := ScaleWorkloads(2, 3, 0); err == nil {
		t.Error("fewer Clusters than servers accepted")
	}
}

func TestCheckShared(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []WorkloadSpec
		want  string
	}{
		{"unknown server", []WorkloadSpec{{Name: "a", SharesWith: "nope"}}, "has none of its own"},
		{"server shares too", []WorkloadSpec{{Name: "a"}, {Name: "b", SharesWith: "a"}, {Name: "c", SharesWith: "b"}}, `"b"`},
		{"server without kubeconfig", []WorkloadSpec{{Name: "a", NoKubeconfig: true}, {Name: "b", SharesWith: "a"}}, "has none of its own"},
		{"sharer without kubeconfig", []WorkloadSpec{{Name: "a"}, {Name: "b", SharesWith: "a", ExecKubeconfig: true}}, "needs a kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkShared(tc.specs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %s", err, tc.want)
			}
		})
	}
}

func TestLinkShared(t *testing.T) {
	f := &Fleet{Workloads: map[string]*Workload{
		"a": {Cluster: Cluster{Name: "a", KubeconfigPath: "/k/a", Server: "https://127.0.0.1:1"}, Spec: WorkloadSpec{Name: "a"}},
		"b": {Cluster: Cluster{Name: "b"}, Spec: WorkloadSpec{Name: "b", SharesWith: "a"}},
	}}
	f.linkShared()
	if b := f.Workloads["b"]; b.KubeconfigPath != "/k/a" || b.Server != "https://127.0.0.1:1" || b.KwokName != "" {
		t.Fatalf("b = %+v", b.Cluster)
	}
}
