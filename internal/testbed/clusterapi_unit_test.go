package testbed

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
)

func TestRewriteWebhooks(t *testing.T) {
	docs, err := decodeYAML([]byte(`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: default.machinedeployment.cluster.x-k8s.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-cluster-x-k8s-io-v1beta2-machinedeployment}
  failurePolicy: Fail
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: validation.extensionconfig.runtime.addons.cluster.x-k8s.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-runtime-cluster-x-k8s-io-v1beta2-extensionconfig}
`))
	if err != nil {
		t.Fatal(err)
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
	out, err := rewriteWebhooks(docs, "capi-core", 34567, ca, "capi")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d configurations, want 2", len(out))
	}
	wantNames := []string{"gradual-testbed-capi-core-mutating", "gradual-testbed-capi-core-validating"}
	wantURLs := []string{"https://127.0.0.1:34567/mutate-cluster-x-k8s-io-v1beta2-machinedeployment", "https://127.0.0.1:34567/validate-runtime-cluster-x-k8s-io-v1beta2-extensionconfig"}
	for i, o := range out {
		if o.GetName() != wantNames[i] {
			t.Errorf("name %q, want %q", o.GetName(), wantNames[i])
		}
		hook := o.Object["webhooks"].([]any)[0].(map[string]any)
		cc := hook["clientConfig"].(map[string]any)
		if cc["url"] != wantURLs[i] || cc["service"] != nil {
			t.Errorf("clientConfig %v, want url %s and no service", cc, wantURLs[i])
		}
		if cc["caBundle"] != base64.StdEncoding.EncodeToString(ca) {
			t.Errorf("caBundle %v", cc["caBundle"])
		}
		sel := hook["namespaceSelector"].(map[string]any)["matchExpressions"].([]any)[0].(map[string]any)
		if sel["key"] != "kubernetes.io/metadata.name" || sel["operator"] != "In" || sel["values"].([]any)[0] != "capi" {
			t.Errorf("namespaceSelector %v, want the capi namespace only", sel)
		}
		if hook["failurePolicy"] != nil && hook["failurePolicy"] != "Fail" {
			t.Errorf("failurePolicy changed: %v", hook["failurePolicy"])
		}
	}

	bad, _ := decodeYAML([]byte("apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: x}\nwebhooks:\n- name: a\n  clientConfig: {url: https://elsewhere}\n"))
	if _, err := rewriteWebhooks(bad, "c", 1, ca, "capi"); err == nil || !strings.Contains(err.Error(), "no service path") {
		t.Errorf("webhook without a service path: got %v", err)
	}
	if _, err := rewriteWebhooks(nil, "c", 1, ca, "capi"); err == nil {
		t.Error("no configurations: want an error")
	}
}

func TestCheckClusterAPIOptions(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	full := Toolchain{ClusterAPI: ClusterAPIBinaries{Core: bin, KubeadmBootstrap: bin, KubeadmControlPlane: bin, CAPD: bin, TestExtension: bin}}
	if !full.HasClusterAPI() {
		t.Error("HasClusterAPI false with every binary present")
	}

	opts := Options{Namespace: "fleet"}
	if err := checkClusterAPIOptions(full, &opts); err != nil || opts.ClusterAPINamespace != DefaultClusterAPINamespace {
		t.Errorf("defaults: %v, namespace %q", err, opts.ClusterAPINamespace)
	}
	noCAPD := full
	noCAPD.ClusterAPI.CAPD = ""
	if err := checkClusterAPIOptions(noCAPD, &Options{Namespace: "fleet"}); err == nil || !strings.Contains(err.Error(), "capd") || !strings.Contains(err.Error(), "toolchain.sh cluster-api") {
		t.Errorf("missing CAPD: got %v, want an error naming capd and how to build it", err)
	}
	if err := checkClusterAPIOptions(full, &Options{Namespace: "fleet", ClusterAPINamespace: "fleet"}); err == nil {
		t.Error("controllers in the fleet's own namespace: want an error")
	}
	if err := checkClusterAPIOptions(full, &Options{Namespace: "fleet", ClusterAPINamespace: "Not_A_Label"}); err == nil {
		t.Error("invalid namespace: want an error")
	}
}

// The Deployments that record the managers carry the flags the processes run with, in the form
// the in-place planner reads Cluster API's InPlaceUpdates feature gate from.
func TestManagerDeploymentsRecordTheFeatureGate(t *testing.T) {
	for _, off := range []bool{false, true} {
		var objs []client.Object
		for i, c := range capiComponents {
			if c.deployment.name == "" {
				continue
			}
			c = c.inPlaceUpdatesOff(off)
			p := ClusterAPIProc{Name: c.name, PID: 100 + i, Log: "/tmp/" + c.name + ".log"}
			objs = append(objs, managerDeployment(c.deployment, p, c.args("/certs", 1, 2, 3)))
		}
		if len(objs) != 3 {
			t.Fatalf("%d manager records, want 3 (core, kubeadm bootstrap and control plane)", len(objs))
		}
		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
		c := fake.NewClientBuilder().WithRESTMapper(mapper).WithScheme(runtime.NewScheme()).WithObjects(objs...).Build()
		g := owners.ReadGates(t.Context(), c)
		want := owners.GateOn
		if off {
			want = owners.GateOff
		}
		if g.Core.State != want || g.KCP.State != want {
			t.Errorf("off=%v: gates %+v; want both %s", off, g, want)
		}
		if !strings.Contains(g.Core.Why, "Deployment capi-system/capi-controller-manager") {
			t.Errorf("core gate evidence %q", g.Core.Why)
		}
	}
}

// A KubeadmControlPlane gets maxSurge 0 only where its webhook allows it (3 replicas or more) and
// in-place rollouts are asked for; otherwise it keeps CAPI's default (one replica, maxSurge 1).
func TestInMemoryClusterControlPlaneRollout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		c         InMemoryCluster
		replicas  int64
		wantSurge bool
	}{
		{"default", InMemoryCluster{InPlaceRollout: true}, 1, false},
		{"three replicas, in place", InMemoryCluster{InPlaceRollout: true, ControlPlaneReplicas: 3}, 3, true},
		{"three replicas, default rollout", InMemoryCluster{ControlPlaneReplicas: 3}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Name, tc.c.Namespace, tc.c.ControlPlaneVersion, tc.c.WorkerVersion = "c", "ns", "v1.34.2", "v1.34.0"
			objs, err := tc.c.Objects()
			if err != nil {
				t.Fatal(err)
			}
			var kcp map[string]any
			for _, o := range objs {
				if o.GetKind() == "KubeadmControlPlane" {
					kcp = o.Object
				}
			}
			if kcp == nil {
				t.Fatal("no KubeadmControlPlane")
			}
			// decodeYAML leaves numbers float64, as JSON does.
			replicas, _, _ := unstructured.NestedFieldNoCopy(kcp, "spec", "replicas")
			if replicas != float64(tc.replicas) {
				t.Errorf("replicas %v, want %d", replicas, tc.replicas)
			}
			surge, found, _ := unstructured.NestedFieldNoCopy(kcp, "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")
			if found != tc.wantSurge || (found && surge != float64(0)) {
				t.Errorf("maxSurge %v (set %v), want set=%v to 0", surge, found, tc.wantSurge)
			}
		})
	}
}

// A cluster built from a ClusterClass is one Cluster whose topology names the class, the version,
// the control plane replicas and one MachineDeployment rolled out in place; it and every object of
// the ClusterClass (and what the topology controller copies from them) carry the watch-filter
// label, or the scoped managers would never see what the topology controller makes.
func TestInMemoryTopology(t *testing.T) {
	objs, err := InMemoryCluster{Namespace: "ns", Name: "c", Class: "cc", ControlPlaneVersion: "v1.34.2", InPlaceRollout: true, Labels: map[string]string{"env": "test"}}.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "Cluster" {
		t.Fatalf("objects %v; want one Cluster", objs)
	}
	cl := objs[0].Object
	if l := objs[0].GetLabels(); l["env"] != "test" || l["cluster.x-k8s.io/watch-filter"] != ClusterAPIWatchFilter {
		t.Errorf("Cluster labels %v", l)
	}
	for path, want := range map[string]any{"classRef.name": "cc", "version": "v1.34.2", "controlPlane.replicas": float64(1)} {
		got, _, _ := unstructured.NestedFieldNoCopy(cl, append([]string{"spec", "topology"}, strings.Split(path, ".")...)...)
		if got != want {
			t.Errorf("spec.topology.%s %v, want %v", path, got, want)
		}
	}
	mds, _, _ := unstructured.NestedSlice(cl, "spec", "topology", "workers", "machineDeployments")
	if len(mds) != 1 {
		t.Fatalf("machineDeployments %v", mds)
	}
	if surge, _, _ := unstructured.NestedFieldNoCopy(mds[0].(map[string]any), "rollout", "strategy", "rollingUpdate", "maxSurge"); surge != float64(0) {
		t.Errorf("md-0 maxSurge %v, want 0", surge)
	}

	class, err := InMemoryClusterClass("ns", "cc")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range class {
		kinds[o.GetKind()] = true
		if o.GetLabels()["cluster.x-k8s.io/watch-filter"] != ClusterAPIWatchFilter || o.GetNamespace() != "ns" {
			t.Errorf("%s %s/%s: labels %v", o.GetKind(), o.GetNamespace(), o.GetName(), o.GetLabels())
		}
	}
	for _, k := range []string{"ClusterClass", "DevClusterTemplate", "KubeadmControlPlaneTemplate", "DevMachineTemplate", "KubeadmConfigTemplate"} {
		if !kinds[k] {
			t.Errorf("no %s in the ClusterClass's objects", k)
		}
	}
	// The Cluster sets the class's one variable to its default, which the class's patch reads.
	vars, _, _ := unstructured.NestedSlice(cl, "spec", "topology", "variables")
	if len(vars) != 1 || vars[0].(map[string]any)["name"] != WorkerNoteVariable || vars[0].(map[string]any)["value"] != WorkerNoteDefault {
		t.Errorf("spec.topology.variables %v, want %s = %s", vars, WorkerNoteVariable, WorkerNoteDefault)
	}
	for _, o := range class {
		if o.GetKind() != "ClusterClass" {
			continue
		}
		defs, _, _ := unstructured.NestedSlice(o.Object, "spec", "variables")
		patches, _, _ := unstructured.NestedSlice(o.Object, "spec", "patches")
		if len(defs) != 1 || defs[0].(map[string]any)["name"] != WorkerNoteVariable || len(patches) != 1 {
			t.Errorf("ClusterClass variables %v, patches %v: want %s and its patch", defs, patches, WorkerNoteVariable)
		}
	}
}
