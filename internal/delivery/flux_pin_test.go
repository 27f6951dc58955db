package delivery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// TestFluxPinsThePlannedDigest: the digest the plan shows (FluxArtifact, computed from the
// planned content, with nothing pushed) is the digest apply pins the cluster to.
func TestFluxPinsThePlannedDigest(t *testing.T) {
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := context.Background()
	planned := pinnedOf(t, w.svc, w.spec)
	if !strings.HasPrefix(planned.Digest, "sha256:") || planned.Ref != fluxSettingsOf(w.svc).Repository+":r1" {
		t.Fatalf("Pinned = %+v", planned)
	}
	if err := w.svc.CheckPinned(ctx, w.spec); err != nil {
		t.Fatalf("CheckPinned before anything is published: %v", err)
	}
	if err := w.Apply(ctx, "c1", "r1"); err != nil {
		t.Fatal(err)
	}
	pinned, ok, err := fluxdelivery.New(mgmt, fluxSettingsOf(w.svc), w.spec.Key).Pinned(ctx, "fleet", "c1")
	if err != nil || !ok || pinned != planned.Digest {
		t.Fatalf("c1 is pinned to %q (%v, %v), want the planned %q", pinned, ok, err, planned.Digest)
	}
}

// TestFluxRefusesAPlantedTag: someone pushes another artifact under the revision's tag after the
// plan. Apply refuses before the Lease (CheckPinned), naming the repository, the tag and
// both digests; and a pin that gets there all the same (a plant between the check and the
// wave) refuses the change on that cluster, pinning nothing.
func TestFluxRefusesAPlantedTag(t *testing.T) {
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := context.Background()
	planned := pinnedOf(t, w.svc, w.spec)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: planted\n  namespace: app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(fluxSettingsOf(w.svc).Repository, oci.OCIRepositoryPrefix) + ":r1"
	pushed, err := oci.NewClient(append(oci.DefaultOptions(), crane.Insecure)).Push(ctx, ref, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, planted, _ := strings.Cut(pushed, "@")

	err = w.svc.CheckPinned(ctx, w.spec)
	if e, ok := usererr.As(err); !ok || !errors.Is(err, fluxdelivery.ErrTagHoldsOther) || e.Summary != "Artifact Tag Holds Other Content" {
		t.Fatalf("CheckPinned over a planted tag = %v, want the refusal", err)
	}
	for _, want := range []string{fluxSettingsOf(w.svc).Repository, "r1", planted, planned.Digest} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	err = w.Apply(ctx, "c1", "r1")
	if !errors.Is(err, engine.ErrChangeRefused) || !errors.Is(err, fluxdelivery.ErrTagHoldsOther) {
		t.Fatalf("Apply over a planted tag = %v, want the change refused", err)
	}
	if _, ok, err := fluxdelivery.New(mgmt, fluxSettingsOf(w.svc), w.spec.Key).Pinned(ctx, "fleet", "c1"); err != nil || ok {
		t.Fatalf("an OCIRepository exists after the refusal (%v, %v): nothing may be pinned", ok, err)
	}
}
