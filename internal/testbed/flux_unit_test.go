package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
)

func TestCheckFluxOptions(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	crds := filepath.Join(dir, "crds")
	if err := os.MkdirAll(crds, 0o755); err != nil {
		t.Fatal(err)
	}
	empty := Toolchain{Flux: FluxBinaries{SourceController: bin, KustomizeController: bin, CRDs: crds}}
	if empty.HasFlux() {
		t.Error("HasFlux true with an empty CRD directory")
	}
	writeFile(t, filepath.Join(crds, "a.yaml"), "kind: CustomResourceDefinition\n")
	full := empty
	if !full.HasFlux() {
		t.Errorf("HasFlux false with everything present: %v", missingFlux(full.Flux))
	}
	opts := Options{}
	if err := checkFluxOptions(full, &opts); err != nil || opts.FluxNamespace != DefaultFluxNamespace {
		t.Errorf("defaults: %v, namespace %q", err, opts.FluxNamespace)
	}
	noKC := full
	noKC.Flux.KustomizeController = ""
	if err := checkFluxOptions(noKC, &Options{}); err == nil || !strings.Contains(err.Error(), "kustomize-controller") || !strings.Contains(err.Error(), "toolchain.sh flux") {
		t.Errorf("missing kustomize-controller: got %v, want an error naming it and how to build it", err)
	}
	if err := checkFluxOptions(full, &Options{FluxNamespace: "Not_A_Label"}); err == nil {
		t.Error("invalid namespace: want an error")
	}
}

func TestWithoutEnv(t *testing.T) {
	got := withoutEnv([]string{"A=1", "KUBECONFIG=/x", "B=2", ociRegistryEnv + "=127.0.0.1:1"}, "KUBECONFIG", ociRegistryEnv)
	if strings.Join(got, " ") != "A=1 B=2" {
		t.Errorf("got %v", got)
	}
}

// The registry runs as this very executable started again with ociRegistryEnv (as the Flux
// option starts it); an artifact pushed with Flux's client library comes back intact.
func TestOCIRegistryChild(t *testing.T) {
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, fluxDir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &Fleet{Dir: dir}
	p, err := f.startFluxProcess("oci-registry", self, nil, []string{ociRegistryEnv + "=" + addr}, "http://"+addr+"/v2/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopOwned([]int{p.PID}, filepath.Join(dir, fluxDir)); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	t0 := time.Now()
	if err := waitReady(ctx, p.Name, p.PID, p.ReadyURL, p.Log, filepath.Join(dir, fluxDir)); err != nil {
		t.Fatal(err)
	}
	t.Logf("registry ready in %s", time.Since(t0).Round(time.Millisecond))

	src := t.TempDir()
	writeFile(t, filepath.Join(src, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	c := oci.NewClient(append(oci.DefaultOptions(), crane.Insecure))
	url := addr + "/bundles/x:rev-1"
	if _, err := c.Push(ctx, url, src, oci.WithPushMetadata(oci.Metadata{Revision: "rev-1"})); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	meta, err := c.Pull(ctx, url, out)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Revision != "rev-1" {
		t.Errorf("revision annotation %q, want rev-1", meta.Revision)
	}
	raw, err := os.ReadFile(filepath.Join(out, "cm.yaml"))
	if err != nil || !strings.Contains(string(raw), "name: x") {
		t.Errorf("pulled cm.yaml: %q, %v", raw, err)
	}
}
