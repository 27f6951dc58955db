package fleet

import (
	"maps"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func ptr[T any](v T) *T { return &v }

func readyV1Beta2() *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "fleet", Labels: map[string]string{"env": "prod"}}}
	c.Status.Phase = "Provisioned"
	c.Status.Initialization.InfrastructureProvisioned = ptr(true)
	c.Status.Initialization.ControlPlaneInitialized = ptr(true)
	c.Spec.Topology.Version = "v1.36.3"
	return c
}

func TestSkipReasons(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		mutate     func(*clusterv1.Cluster)
		kubeconfig bool
		problem    string
		want       string
	}{
		"eligible":        {func(*clusterv1.Cluster) {}, true, "", ""},
		"no kubeconfig":   {func(*clusterv1.Cluster) {}, false, "", `kubeconfig Secret fleet/a-kubeconfig (key "value") not found`},
		"exec plugin":     {func(*clusterv1.Cluster) {}, true, "kubeconfig asks to run an exec credential plugin", "exec credential plugin"},
		"cp not ready":    {func(c *clusterv1.Cluster) { c.Status.Initialization.ControlPlaneInitialized = ptr(false) }, true, "", "control plane is not initialized"},
		"infra not ready": {func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = nil }, true, "", "infrastructure is not provisioned"},
		"paused spec":     {func(c *clusterv1.Cluster) { c.Spec.Paused = ptr(true) }, true, "", "paused"},
		"paused annotation": {func(c *clusterv1.Cluster) {
			c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		}, true, "", "paused"},
		"deleting wins": {func(c *clusterv1.Cluster) {
			c.DeletionTimestamp = &now
			c.Spec.Paused = ptr(true)
		}, false, "", "being deleted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := readyV1Beta2()
			tc.mutate(obj)
			c := fromV1Beta2(obj)
			c.KubeconfigAvailable = tc.kubeconfig
			c.KubeconfigProblem = tc.problem
			got := skipReason(c)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("skip reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFromV1Beta2(t *testing.T) {
	c := fromV1Beta2(readyV1Beta2())
	if !c.ControlPlaneReady || !c.InfrastructureReady || c.Paused || c.KubernetesVersion != "v1.36.3" || c.Phase != "Provisioned" {
		t.Fatalf("unexpected %+v", c)
	}
	obj := readyV1Beta2()
	obj.Spec.Topology.Version = ""
	obj.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{Versions: []clusterv1.StatusVersion{{Version: "v1.35.0"}}}
	if v := fromV1Beta2(obj).KubernetesVersion; v != "v1.35.0" {
		t.Fatalf("version from control plane status = %q", v)
	}
}

func TestFromV1Beta1(t *testing.T) {
	obj := &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "fleet"}}
	obj.Status.ControlPlaneReady = true
	obj.Status.InfrastructureReady = true
	obj.Spec.Topology = &clusterv1beta1.Topology{Version: "v1.30.1"}
	c := fromV1Beta1(obj)
	if !c.ControlPlaneReady || !c.InfrastructureReady || c.KubernetesVersion != "v1.30.1" {
		t.Fatalf("unexpected %+v", c)
	}
	obj.Spec.Paused = true
	if !fromV1Beta1(obj).Paused {
		t.Fatal("spec.paused not read")
	}
}

func TestWorkloadKubeconfig(t *testing.T) {
	base := `apiVersion: v1
kind: Config
current-context: w
clusters: [{name: w, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: w, context: {cluster: w, user: u}}]
users: [{name: u, user: %s}]
`
	good := strings.Replace(base, "%s", "{token: s3cr3t}", 1)
	if _, err := WorkloadRESTConfig([]byte(good)); err != nil {
		t.Fatalf("good kubeconfig refused: %v", err)
	}
	if p := checkKubeconfig([]byte(good)); p != "" {
		t.Fatalf("good kubeconfig has problem %q", p)
	}
	exec := strings.Replace(base, "%s", "{exec: {apiVersion: client.authentication.k8s.io/v1, command: aws-iam-authenticator, args: [s3cr3t]}}", 1)
	_, err := WorkloadRESTConfig([]byte(exec))
	if err == nil || !strings.Contains(err.Error(), `exec credential plugin ("aws-iam-authenticator")`) {
		t.Fatalf("exec kubeconfig: %v", err)
	}
	for name, tc := range map[string]struct{ kubeconfig, want string }{
		"tokenFile": {strings.Replace(base, "%s", "{tokenFile: /var/run/secrets/s3cr3t/token}", 1), "token from a local file (tokenFile)"},
		"client-certificate file": {strings.Replace(base, "%s", "{client-certificate: /etc/s3cr3t/tls.crt, client-key-data: eA==}", 1),
			"client certificate or key from a local file"},
		"client-key file": {strings.Replace(base, "%s", "{client-certificate-data: eA==, client-key: /etc/s3cr3t/tls.key}", 1),
			"client certificate or key from a local file"},
		"certificate-authority file": {strings.Replace(strings.Replace(base, "%s", "{token: t}", 1),
			`{server: "https://127.0.0.1:1"}`, `{server: "https://127.0.0.1:1", certificate-authority: /etc/s3cr3t/ca.crt}`, 1),
			"CA from a local file (certificate-authority)"},
		"proxy-url": {strings.Replace(strings.Replace(base, "%s", "{token: t}", 1),
			`{server: "https://127.0.0.1:1"}`, `{server: "https://127.0.0.1:1", proxy-url: "http://user:s3cr3t@evil.example:3128"}`, 1),
			"through a proxy (proxy-url)"},
		"auth-provider": {strings.Replace(base, "%s", "{auth-provider: {name: oidc, config: {id-token: s3cr3t}}}", 1), `"oidc" auth-provider`},
	} {
		t.Run(name, func(t *testing.T) {
			p := checkKubeconfig([]byte(tc.kubeconfig))
			if !strings.Contains(p, tc.want) || strings.Contains(p, "s3cr3t") {
				t.Fatalf("problem %q, want %q and no path or credential", p, tc.want)
			}
			// The same problem refuses the kubeconfig when a client is built from it.
			if _, err := WorkloadRESTConfig([]byte(tc.kubeconfig)); err == nil || err.Error() != p {
				t.Fatalf("WorkloadRESTConfig: %v", err)
			}
			// And it is the reason the cluster is skipped.
			c := Cluster{InfrastructureReady: true, ControlPlaneReady: true, KubeconfigAvailable: true, KubeconfigProblem: p}
			if skipReason(c) != p {
				t.Fatalf("skip reason %q", skipReason(c))
			}
		})
	}
	if p := checkKubeconfig([]byte("s3cr3t: [")); !strings.Contains(p, "cannot be parsed") || strings.Contains(p, "s3cr3t") {
		t.Fatalf("bad kubeconfig problem %q", p)
	}
}

func TestSelector(t *testing.T) {
	sel, err := LabelSelector{
		MatchLabels:      map[string]string{"env": "prod"},
		MatchExpressions: []Requirement{{Key: "region", Operator: "In", Values: []string{"eu", "us"}}},
	}.Selector()
	if err != nil {
		t.Fatal(err)
	}
	if got := sel.String(); got != "env=prod,region in (eu,us)" {
		t.Fatalf("selector %q", got)
	}
	for _, bad := range []LabelSelector{
		{MatchLabels: map[string]string{"bad key!": "x"}},
		{MatchExpressions: []Requirement{{Key: "a", Operator: "In"}}},
		{MatchExpressions: []Requirement{{Key: "a", Operator: "Exists", Values: []string{"x"}}}},
		{MatchExpressions: []Requirement{{Key: "a", Operator: "Near", Values: []string{"x"}}}},
	} {
		if _, err := bad.Selector(); err == nil || !strings.Contains(err.Error(), "Invalid Selector") {
			t.Errorf("%+v: want Invalid Selector, got %v", bad, err)
		}
	}
}

// TestTopologyVariablesAndAnnotations: what per-cluster values read from a Cluster, in both API
// versions: its annotations, and its ClusterClass variables as the JSON the Cluster gives.
func TestTopologyVariablesAndAnnotations(t *testing.T) {
	v2 := readyV1Beta2()
	v2.Annotations = map[string]string{"example.com/zone": "z1"}
	v2.Spec.Topology.Variables = []clusterv1.ClusterVariable{
		{Name: "region", Value: apiextensionsv1.JSON{Raw: []byte(`"eu-west"`)}},
		{Name: "replicas", Value: apiextensionsv1.JSON{Raw: []byte(`3`)}},
	}
	v1 := &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"example.com/zone": "z2"}}}
	v1.Spec.Topology = &clusterv1beta1.Topology{Variables: []clusterv1beta1.ClusterVariable{{Name: "region", Value: apiextensionsv1.JSON{Raw: []byte(`"us"`)}}}}
	for _, tc := range []struct {
		got      Cluster
		zone     string
		topology map[string]string
	}{
		{fromV1Beta2(v2), "z1", map[string]string{"region": `"eu-west"`, "replicas": `3`}},
		{fromV1Beta1(v1), "z2", map[string]string{"region": `"us"`}},
	} {
		if tc.got.Annotations["example.com/zone"] != tc.zone || !maps.Equal(tc.got.TopologyVariables, tc.topology) {
			t.Errorf("%s: annotations %v topology variables %v, want zone %s and %v", tc.got.Name, tc.got.Annotations, tc.got.TopologyVariables, tc.zone, tc.topology)
		}
	}
	if got := fromV1Beta2(readyV1Beta2()).TopologyVariables; got != nil {
		t.Errorf("a Cluster without variables: %v", got)
	}
}
