package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fluxTestEnv opts in to TestFluxControllers: it is not part of `make test` yet.
const fluxTestEnv = "GRADUAL_TEST_FLUX"

const (
	ociRepositoryAPI = "source.toolkit.fluxcd.io/v1"
	kustomizationAPI = "kustomize.toolkit.fluxcd.io/v1"
)

// TestFluxControllers starts a fleet with Flux's real source-controller and kustomize-controller
// and delivers a two-object bundle to a workload cluster the way the Flux engine is to: an OCI
// artifact per revision (pushed with Flux's own client library to the fleet's registry), an
// OCIRepository for it, and a Kustomization that applies it remotely through the workload's CAPI
// kubeconfig Secret. It checks the first revision lands with Ready=True and lastAppliedRevision
// naming the tag, that moving the OCIRepository to a second tag applies the change, and that
// deleting the Kustomization prunes what it applied. The timings it logs are the figures for the
// Flux engine's notes.
//
//	source ~/.cache/terraform-provider-gradual/toolchain.env
//	GRADUAL_TEST_FLUX=1 flock -o /tmp/gradual-heavy.lock go test -run TestFluxControllers -v ./internal/testbed/
func TestFluxControllers(t *testing.T) {
	tc, err := ToolchainFromEnv()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	if !tc.HasFlux() {
		t.Skipf("skipping: Flux controllers missing (%s); build them with `tools/toolchain.sh flux`", strings.Join(missingFlux(tc.Flux), ", "))
	}
	if os.Getenv(fluxTestEnv) != "1" {
		t.Skipf("skipping: set %s=1 to run (starts Flux's source-controller and kustomize-controller)", fluxTestEnv)
	}
	const workload = "flux-1"
	t0 := time.Now()
	f := Start(t, Options{Flux: true, Workloads: []WorkloadSpec{{Name: workload, Ready: true, Nodes: 1}}})
	t.Logf("timing: fleet (management + 1 workload) with Flux up in %s", time.Since(t0).Round(100*time.Millisecond))
	// Each controller builds in a temporary directory of its own, under the fleet's: another
	// bed's kustomize-controller, starting, removes the kustomization-* directories of its TMPDIR.
	for _, p := range f.Flux.Processes {
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		var tmp string
		for kv := range strings.SplitSeq(string(environ), "\x00") {
			if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
				tmp = v
			}
		}
		if !strings.HasPrefix(tmp, f.Flux.Dir+string(filepath.Separator)) {
			t.Errorf("%s runs with TMPDIR %q, want a directory under %s", p.Name, tmp, f.Flux.Dir)
		}
	}
	ctx := t.Context()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := f.WorkloadClient(workload)
	if err != nil {
		t.Fatal(err)
	}
	// The Flux objects live beside the Cluster and its <name>-kubeconfig Secret: a
	// Kustomization's kubeConfig.secretRef names a Secret of its own namespace.
	ns := f.Namespace
	repo := f.Flux.Registry + "/gradual/" + workload
	const bundleNS, cmName = "flux-proof", "proof"

	push := func(tag, value string) string {
		t.Helper()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "namespace.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", bundleNS))
		writeFile(t, filepath.Join(dir, "configmap.yaml"), fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  revision: %q\n", cmName, bundleNS, value))
		c := oci.NewClient(append(oci.DefaultOptions(), crane.Insecure))
		t1 := time.Now()
		digest, err := c.Push(ctx, repo+":"+tag, dir, oci.WithPushMetadata(oci.Metadata{Source: "gradual-testbed", Revision: tag}))
		if err != nil {
			t.Fatalf("push %s:%s: %v", repo, tag, err)
		}
		t.Logf("timing: pushed %s (%s) in %s", tag, digest, time.Since(t1).Round(time.Millisecond))
		return digest
	}

	push("rev-1", "one")
	ocirepo := FluxObject(ociRepositoryAPI, "OCIRepository", ns, workload)
	ocirepo.Object["spec"] = map[string]any{
		"url":      f.Flux.RegistryURL("gradual/" + workload),
		"ref":      map[string]any{"tag": "rev-1"},
		"insecure": true,
		"interval": "10m",
	}
	ks := FluxObject(kustomizationAPI, "Kustomization", ns, workload)
	ks.Object["spec"] = map[string]any{
		"sourceRef":     map[string]any{"kind": "OCIRepository", "name": workload},
		"path":          "./",
		"interval":      "10m",
		"retryInterval": "5s",
		"timeout":       "1m",
		"prune":         true,
		"wait":          true,
		"kubeConfig":    map[string]any{"secretRef": map[string]any{"name": workload + "-kubeconfig", "key": "value"}},
	}
	t1 := time.Now()
	for _, o := range []*unstructured.Unstructured{ocirepo, ks} {
		if err := mc.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetKind(), err)
		}
	}

	// waitApplied waits for the Kustomization to report tag applied; it returns how long that took.
	waitApplied := func(tag, value string) time.Duration {
		t.Helper()
		t1 := time.Now()
		var last string
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			got := FluxObject(kustomizationAPI, "Kustomization", ns, workload)
			if err := mc.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
				return false, err
			}
			status, reason, msg := readyCondition(got)
			rev, _, _ := unstructured.NestedString(got.Object, "status", "lastAppliedRevision")
			last = fmt.Sprintf("Ready=%s %s: %s; lastAppliedRevision %q", status, reason, msg, rev)
			return status == "True" && strings.HasPrefix(rev, tag+"@sha256:"), nil
		})
		if err != nil {
			src := FluxObject(ociRepositoryAPI, "OCIRepository", ns, workload)
			_ = mc.Get(ctx, client.ObjectKeyFromObject(src), src)
			s, r, m := readyCondition(src)
			t.Fatalf("Kustomization did not apply %s: %v; last seen %s; OCIRepository Ready=%s %s: %s; logs in %s", tag, err, last, s, r, m, filepath.Join(f.Flux.Dir, "logs"))
		}
		readyAt := time.Since(t1)
		var cm corev1.ConfigMap
		if err := wc.Get(ctx, client.ObjectKey{Namespace: bundleNS, Name: cmName}, &cm); err != nil {
			t.Fatalf("%s: ConfigMap in workload %s: %v", tag, workload, err)
		}
		if cm.Data["revision"] != value {
			t.Fatalf("%s: ConfigMap data %v, want revision=%s", tag, cm.Data, value)
		}
		t.Logf("%s applied to %s: %s", tag, workload, last)
		return readyAt
	}

	created := time.Since(t1)
	ready := waitApplied("rev-1", "one")
	t.Logf("timing: first delivery: OCIRepository + Kustomization created in %s (the client's first discovery included), Ready with rev-1 %s later",
		created.Round(10*time.Millisecond), ready.Round(10*time.Millisecond))
	var nsObj corev1.Namespace
	if err := wc.Get(ctx, client.ObjectKey{Name: bundleNS}, &nsObj); err != nil {
		t.Fatalf("namespace %s in workload: %v", bundleNS, err)
	}

	push("rev-2", "two")
	patch := []byte(`{"spec":{"ref":{"tag":"rev-2"}}}`)
	if err := mc.Patch(ctx, FluxObject(ociRepositoryAPI, "OCIRepository", ns, workload), client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	ready = waitApplied("rev-2", "two")
	t.Logf("timing: second revision: OCIRepository ref.tag moved to rev-2, Ready with rev-2 %s later", ready.Round(10*time.Millisecond))

	t1 = time.Now()
	if err := mc.Delete(ctx, FluxObject(kustomizationAPI, "Kustomization", ns, workload)); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: workload}, FluxObject(kustomizationAPI, "Kustomization", ns, workload))
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("Kustomization not gone: %v", err)
	}
	goneAt := time.Since(t1)
	if err := wc.Get(ctx, client.ObjectKey{Namespace: bundleNS, Name: cmName}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap after the Kustomization's deletion: %v, want NotFound (pruned)", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := wc.Get(ctx, client.ObjectKey{Name: bundleNS}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("namespace %s not pruned: %v", bundleNS, err)
	}
	t.Logf("timing: prune (Kustomization deleted → gone %s, its Namespace gone from the workload %s)",
		goneAt.Round(10*time.Millisecond), time.Since(t1).Round(10*time.Millisecond))
}

// readyCondition is the Ready condition of a Flux object: status, reason, message.
func readyCondition(u *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return status, reason, message
	}
	return "Unknown", "", "no Ready condition yet"
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
